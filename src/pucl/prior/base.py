"""What every class-prior estimator is: a scikit-learn estimator whose
`fit(X_unlabeled, X_positive)` learns `prior_`, the share of positives in the unlabeled
data, registered by name in PRIOR_ESTIMATORS (`prior.method` in params.yaml)."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from pucl.registry import Registry

PRIOR_ESTIMATORS = Registry("prior estimator", "pucl.prior")


def as_rows(X: Any, what: str) -> np.ndarray:
    """Any array of n samples (features [n, d] or images [n, c, h, w]) as float64 [n, d]."""
    arr = np.asarray(X)
    if arr.ndim < 2:
        raise ValueError(f"{what} must have one row per sample (2 or more dimensions), "
                         f"got shape {arr.shape}")
    if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise ValueError(f"{what} must be numeric, got dtype {arr.dtype}")
    rows = arr.reshape(len(arr), -1).astype(np.float64)
    if not np.isfinite(rows).all():
        raise ValueError(f"{what} holds NaN or infinite values")
    return rows


class PriorEstimator(BaseEstimator):
    """Base class: subclasses implement `_estimate(U, P) -> (prior, details)` on float64
    rows; `fit` validates the inputs and sets `prior_`, `details_`, `n_features_in_` (and
    `sample_shape_`, one row's original shape, before `_estimate` runs)."""

    min_samples = 2  # per side; estimators with held-out splits need more

    def fit(self, X_unlabeled: Any, X_positive: Any) -> PriorEstimator:
        U = as_rows(X_unlabeled, "X_unlabeled")
        P = as_rows(X_positive, "X_positive")
        if U.shape[1] != P.shape[1]:
            raise ValueError(f"X_unlabeled has {U.shape[1]} features per sample but "
                             f"X_positive has {P.shape[1]}")
        if len(U) < self.min_samples or len(P) < self.min_samples:
            raise ValueError(f"{type(self).__name__} needs at least {self.min_samples} "
                             f"samples per side{self.size_hint()}, got {len(U)} unlabeled "
                             f"and {len(P)} positive")
        self.sample_shape_ = tuple(np.shape(X_unlabeled)[1:])  # (c, h, w) for images
        if tuple(np.shape(X_positive)[1:]) != self.sample_shape_:
            raise ValueError(f"X_unlabeled rows have shape {list(self.sample_shape_)} but "
                             f"X_positive rows {list(np.shape(X_positive)[1:])}")
        prior, details = self._estimate(U, P)
        self.prior_ = float(prior)
        self.details_ = details
        self.n_features_in_ = U.shape[1]
        return self

    def size_hint(self) -> str:
        """Why min_samples is what it is, for the refusal message ("" when obvious)."""
        return ""

    def _estimate(self, U: np.ndarray, P: np.ndarray) -> tuple[float, dict]:
        raise NotImplementedError

    @property
    def prior(self) -> float:
        check_is_fitted(self, "prior_")
        return self.prior_
