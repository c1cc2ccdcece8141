"""Prior-ranked pseudo-labels (`pupl.method: prior_rank`)."""

from __future__ import annotations

import numpy as np

from pucl.pupl.algorithms import PseudoLabels, prior_rank
from pucl.pupl.base import PSEUDO_LABELLERS, PseudoLabeller


@PSEUDO_LABELLERS.register("prior_rank")
class PriorRankLabeller(PseudoLabeller):
    """The prior's share of U nearest (cosine) the labelled-positive centroid is positive."""

    labels_with_prior = True

    def __init__(self, prior: float = 0.5):
        self.prior = prior

    def _label(self, z: np.ndarray, labeled: np.ndarray, in_u: np.ndarray
               ) -> tuple[PseudoLabels, str | None]:
        return prior_rank(z, labeled, in_u, self.prior), None
