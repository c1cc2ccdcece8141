"""PUPL as the paper states it: PU-aware 2-means (`pupl.method: pu_kmeans`)."""

from __future__ import annotations

import numpy as np

from pucl.pupl.algorithms import PseudoLabels, pu_kmeans
from pucl.pupl.base import PSEUDO_LABELLERS, KMeansParams, PseudoLabeller


@PSEUDO_LABELLERS.register("pu_kmeans", params=KMeansParams, params_key="kmeans")
class PUPL(PseudoLabeller):
    """PU-aware 2-means: positive centroid from the labelled positives, D^2 seeding, labelled
    positives clamped, the lowest-potential of `restarts` seeded runs (prior-free; given a
    prior estimate, a split far from it is flagged in degenerate_, never changed)."""

    def __init__(self, restarts: int = 50, max_iter: int = 100, prior: float | None = None,
                 share_tolerance: float = 0.15, random_state: int | None = 0,
                 mean_start: bool = True):
        self.restarts = restarts
        self.mean_start = mean_start
        self.max_iter = max_iter
        self.prior = prior  # not used to label: only to flag a degenerate split (degenerate_)
        self.share_tolerance = share_tolerance
        self.random_state = random_state

    def _label(self, z: np.ndarray, labeled: np.ndarray, in_u: np.ndarray
               ) -> tuple[PseudoLabels, str | None]:
        rng = np.random.default_rng(self.random_state)
        return pu_kmeans(z, labeled, self.restarts, self.max_iter, rng, self.mean_start), None
