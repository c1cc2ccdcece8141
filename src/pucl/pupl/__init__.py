"""PUPL: PU-aware pseudo-labelling. Labellers are registered in PSEUDO_LABELLERS, each a
scikit-learn estimator with `fit_predict(X, s)`; the algorithms live in `algorithms`."""

from pucl.pupl.algorithms import PseudoLabels, prior_rank, pu_kmeans
from pucl.pupl.base import PSEUDO_LABELLERS, PseudoLabeller

__all__ = ["PSEUDO_LABELLERS", "PseudoLabeller", "PseudoLabels", "prior_rank", "pu_kmeans"]
