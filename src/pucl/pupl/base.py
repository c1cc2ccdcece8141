"""What every pseudo-labeller is: a scikit-learn estimator whose `fit(X, s, in_u=None)`
labels every row 0 / 1 from features X and PU labels s (1: labelled positive, 0:
unlabeled), keeping each labelled positive positive. Registered by name in
PSEUDO_LABELLERS (`pupl.method` in params.yaml)."""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field
from sklearn.base import BaseEstimator, ClusterMixin

from pucl.pupl.algorithms import PseudoLabels
from pucl.registry import EntryParams, Registry

PSEUDO_LABELLERS = Registry("pseudo-labeller", "pucl.pupl")


class KMeansParams(EntryParams):
    """Settings of the PU-aware 2-means (pu_kmeans and auto share them: `pupl.kmeans`)."""

    restarts: int = Field(50, ge=1, description="seeded 2-means runs; the lowest potential wins")
    max_iter: int = Field(100, ge=1, description="Lloyd iterations per run")
    share_tolerance: float = Field(0.15, gt=0.0, lt=1.0, description="auto: accepted "
                                   "|2-means positive share of U - prior estimate|")
    mean_start: bool = Field(True, description="one more run, its negative centroid "
                             "started at U's mean (the authors' released code's start)")


def check_pu_input(X: Any, s: Any, in_u: Any = None) -> tuple[np.ndarray, ...]:
    """float32 features [n, d], bool labelled mask [n] and bool U membership [n] (default:
    the unlabeled rows)."""
    z = np.asarray(X)
    if z.ndim != 2 or len(z) == 0:
        raise ValueError(f"X must be a non-empty 2-d array of features, got shape {z.shape}")
    z = np.ascontiguousarray(z, dtype=np.float32)
    if not np.isfinite(z).all():
        raise ValueError("X holds NaN or infinite values")
    s = np.asarray(s).ravel()
    if s.shape != (len(z),):
        raise ValueError(f"s must hold one PU label per row of X ({len(z)}), got shape "
                         f"{s.shape}")
    values = set(np.unique(s).tolist())
    if not values <= {0, 1}:
        raise ValueError(f"s must hold PU labels 1 (labelled positive) and 0 (unlabeled), "
                         f"got values {sorted(values)}")
    labeled = s == 1
    member = ~labeled if in_u is None else np.asarray(in_u, dtype=bool).ravel()
    if member.shape != (len(z),):
        raise ValueError(f"in_u must hold one flag per row of X ({len(z)}), got shape "
                         f"{member.shape}")
    return z, labeled, member


DEFAULT_TOLERANCE = 0.15  # labellers without a share_tolerance setting (prior_rank)


def degeneracy(share_u: float, prior: float | None, tolerance: float) -> str | None:
    """Why a labelling of U whose positive share is `share_u` is degenerate, or None: a
    class left empty, or (given a prior estimate) a share further than `tolerance` from it
    (the clusters are then not P and N: F-MNIST-I's 2-means put 0.91 of U positive)."""
    if share_u <= 0.0 or share_u >= 1.0:
        return (f"the pseudo-labels leave the {'positive' if share_u <= 0 else 'negative'} "
                "class empty in U")
    if prior is not None and abs(share_u - prior) > tolerance:
        return (f"the pseudo-labels put {share_u:.3f} of U positive against a prior estimate "
                f"of {prior:.3f} (tolerance {tolerance})")
    return None


class PseudoLabeller(ClusterMixin, BaseEstimator):
    """Base class: subclasses implement `_label(z, labeled, in_u) -> PseudoLabels`; `fit`
    sets labels_, margin_ (> 0 leans positive), inertia_ (k-means potential), method_
    (what labelled in the end), fallback_ (why another method was used, or None) and
    degenerate_ (why the final labels are degenerate, or None: `degeneracy`, checked for
    every labeller against its `prior` when it has one). `labels_with_prior`: the prior
    estimate decides labels (not only checks them)."""

    labels_with_prior = False

    def fit(self, X: Any, s: Any, in_u: Any = None) -> PseudoLabeller:
        z, labeled, member = check_pu_input(X, s, in_u)
        result, why = self._label(z, labeled, member)
        self.result_ = result
        self.labels_ = result.labels
        self.margin_ = result.margin
        self.inertia_ = result.potential
        self.method_ = result.method
        self.n_iter_ = result.iterations
        self.fallback_ = why
        self.degenerate_ = degeneracy(float(result.labels[member].mean()),
                                      getattr(self, "prior", None),
                                      getattr(self, "share_tolerance", DEFAULT_TOLERANCE))
        self.n_features_in_ = z.shape[1]
        return self

    def fit_predict(self, X: Any, s: Any = None, in_u: Any = None, **_: Any) -> np.ndarray:
        if s is None:
            raise ValueError("fit_predict needs s, the PU labels (1: labelled positive)")
        return self.fit(X, s, in_u).labels_

    def _label(self, z: np.ndarray, labeled: np.ndarray, in_u: np.ndarray
               ) -> tuple[PseudoLabels, str | None]:
        raise NotImplementedError
