"""Class-prior estimation: estimators registered in PRIOR_ESTIMATORS, each a scikit-learn
estimator with `fit(X_unlabeled, X_positive)` -> `prior_`."""

from pucl.prior.base import PRIOR_ESTIMATORS, PriorEstimator
from pucl.prior.km2 import PriorEstimate, estimate_prior, prepare_features

__all__ = ["PRIOR_ESTIMATORS", "PriorEstimate", "PriorEstimator", "estimate_prior",
           "prepare_features"]
