"""Many clusters, each labelled by its share of labelled positives (`pupl.method:
cluster_share`)."""

from __future__ import annotations

import numpy as np
from pydantic import Field

from pucl.pupl.algorithms import PseudoLabels, cluster_share
from pucl.pupl.base import PSEUDO_LABELLERS, EntryParams, PseudoLabeller


class ClusterShareParams(EntryParams):
    """Settings of the many-cluster labeller (`pupl.cluster_share`)."""

    clusters: int = Field(50, ge=2, description="k-means clusters (faiss)")
    max_iter: int = Field(25, ge=1, description="Lloyd iterations per run")
    restarts: int = Field(3, ge=1, description="seeded k-means runs; the lowest potential wins")


@PSEUDO_LABELLERS.register("cluster_share", params=ClusterShareParams,
                           params_key="cluster_share")
class ClusterShareLabeller(PseudoLabeller):
    """k-means into many clusters; a cluster is positive when the labelled positives and
    the prior estimate say at least half its rows of U are (prior * its share of the
    labelled positives / its share of U >= 0.5)."""

    labels_with_prior = True

    def __init__(self, prior: float = 0.5, clusters: int = 50, max_iter: int = 25,
                 restarts: int = 3, random_state: int | None = 0):
        self.prior = prior
        self.clusters = clusters
        self.max_iter = max_iter
        self.restarts = restarts
        self.random_state = random_state

    def _label(self, z: np.ndarray, labeled: np.ndarray, in_u: np.ndarray
               ) -> tuple[PseudoLabels, str | None]:
        return cluster_share(z, labeled, in_u, self.prior, self.clusters, self.max_iter,
                             self.restarts, int(self.random_state or 0)), None
