"""pucl: contrastive learning from positive and unlabeled data.

The library API, in scikit-learn's conventions (labels 0 / 1, `classes_`, `predict_proba`
of shape (n, 2), learned attributes ending in `_`):

    from pucl import PUClassifier, TEDn, PUPL
    PUClassifier().fit(X, s).predict(X_new)     # s: 1 = labelled positive, 0 = unlabeled
    TEDn().fit(X_unlabeled, X_positive).prior_  # the class prior of the unlabeled rows
    PUPL().fit_predict(features, s)             # PU-aware 2-means pseudo-labels

Every method is registered by name: `pucl.list_methods()` shows them all. Names are
imported on first use, so `import pucl` stays light and a pipeline stage importing one
module of pucl does not depend on the others.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "PUClassifier": "pucl.estimators",
    "KM1": "pucl.prior.kernel_mean",
    "KM2": "pucl.prior.kernel_mean",
    "BBE": "pucl.prior.bbe",
    "DEDPUL": "pucl.prior.dedpul",
    "TEDn": "pucl.prior.tedn",
    "PriorEstimator": "pucl.prior.base",
    "PRIOR_ESTIMATORS": "pucl.prior.base",
    "PUPL": "pucl.pupl.kmeans",
    "PriorRankLabeller": "pucl.pupl.ranked",
    "AutoLabeller": "pucl.pupl.auto",
    "PSEUDO_LABELLERS": "pucl.pupl.base",
    "CONTRASTIVE_LOSSES": "pucl.losses.contrastive",
    "PRETRAINING_METHODS": "pucl.pretraining.base",
    "CLASSIFIER_OBJECTIVES": "pucl.classify.objectives",
    "ENCODERS": "pucl.models.encoders",
}
_REGISTRIES = ("PRIOR_ESTIMATORS", "PRETRAINING_METHODS", "ENCODERS", "CONTRASTIVE_LOSSES",
               "PSEUDO_LABELLERS", "CLASSIFIER_OBJECTIVES")
__all__ = [*_EXPORTS, "list_methods"]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'pucl' has no attribute {name!r}")


def list_methods(pattern: str = "*") -> dict[str, list[str]]:
    """Every registry's kind and the names in it matching a shell-style pattern."""
    return {registry.kind: registry.names(pattern)
            for registry in (__getattr__(name) for name in _REGISTRIES)}
