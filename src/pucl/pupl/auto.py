"""The default (`pupl.method: auto`): the paper's 2-means, checked against the prior."""

from __future__ import annotations

import numpy as np

from pucl.pupl.algorithms import PseudoLabels, prior_rank
from pucl.pupl.base import PSEUDO_LABELLERS, KMeansParams, degeneracy
from pucl.pupl.kmeans import PUPL


@PSEUDO_LABELLERS.register("auto", params=KMeansParams, params_key="kmeans")
class AutoLabeller(PUPL):
    """pu_kmeans, unless its split is degenerate (a class empty, or the share of U it labels
    positive further than share_tolerance from the prior): then prior_rank labels
    (fallback_ says why)."""

    def __init__(self, prior: float = 0.5, share_tolerance: float = 0.15, restarts: int = 50,
                 max_iter: int = 100, random_state: int | None = 0, mean_start: bool = True):
        super().__init__(restarts, max_iter, prior, share_tolerance, random_state, mean_start)

    def _label(self, z: np.ndarray, labeled: np.ndarray, in_u: np.ndarray
               ) -> tuple[PseudoLabels, str | None]:
        result, _ = super()._label(z, labeled, in_u)
        problem = degeneracy(float(result.labels[in_u].mean()), self.prior,
                             self.share_tolerance)
        if problem is None:
            return result, None
        return prior_rank(z, labeled, in_u, self.prior), f"{problem}: used prior_rank instead"
