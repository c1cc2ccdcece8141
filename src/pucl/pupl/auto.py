"""The default (`pupl.method: auto`): the paper's 2-means, checked against the prior."""

from __future__ import annotations

import numpy as np

from pucl.pupl.algorithms import PseudoLabels, prior_rank
from pucl.pupl.base import PSEUDO_LABELLERS, KMeansParams
from pucl.pupl.kmeans import PUPL


@PSEUDO_LABELLERS.register("auto", params=KMeansParams, params_key="kmeans")
class AutoLabeller(PUPL):
    """pu_kmeans, unless the share of U it labels positive is further than prior_tolerance
    from the prior: then its split is not P vs N, and prior_rank labels (fallback_ says)."""

    def __init__(self, prior: float = 0.5, prior_tolerance: float = 0.15, restarts: int = 50,
                 max_iter: int = 100, random_state: int | None = 0):
        super().__init__(restarts, max_iter, random_state)
        self.prior = prior
        self.prior_tolerance = prior_tolerance

    def _label(self, z: np.ndarray, labeled: np.ndarray, in_u: np.ndarray
               ) -> tuple[PseudoLabels, str | None]:
        result, _ = super()._label(z, labeled, in_u)
        share = float(result.labels[in_u].mean())
        if abs(share - self.prior) <= self.prior_tolerance:
            return result, None
        why = (f"2-means labelled {share:.3f} of U positive against a prior estimate of "
               f"{self.prior:.3f} (tolerance {self.prior_tolerance}): used prior_rank instead")
        return prior_rank(z, labeled, in_u, self.prior), why
