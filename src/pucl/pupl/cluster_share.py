"""Many clusters, each labelled by its share of labelled positives (`pupl.method:
cluster_share`)."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from pucl.pupl.algorithms import PseudoLabels, cluster_share
from pucl.pupl.base import PSEUDO_LABELLERS, EntryParams, PseudoLabeller

LABELLED_PER_CLUSTER = 20
MAX_CLUSTERS = 100


class ClusterShareParams(EntryParams):
    """Settings of the many-cluster labeller (`pupl.cluster_share`)."""

    clusters: int | Literal["auto"] = Field(
        "auto", description="k-means clusters (faiss); auto: one per 20 labelled positives, "
        "2 to 100")
    max_iter: int = Field(25, ge=1, description="Lloyd iterations per run")
    restarts: int = Field(3, ge=1, description="seeded k-means runs; the lowest potential wins")


@PSEUDO_LABELLERS.register("cluster_share", params=ClusterShareParams,
                           params_key="cluster_share")
class ClusterShareLabeller(PseudoLabeller):
    """k-means into many clusters; a cluster is positive when the labelled positives and
    the prior estimate say at least half its rows of U are (prior * its share of the
    labelled positives / its share of U >= 0.5)."""

    labels_with_prior = True

    def __init__(self, prior: float = 0.5, clusters: int | str = "auto", max_iter: int = 25,
                 restarts: int = 3, random_state: int | None = 0):
        self.prior = prior
        self.clusters = clusters
        self.max_iter = max_iter
        self.restarts = restarts
        self.random_state = random_state

    def _label(self, z: np.ndarray, labeled: np.ndarray, in_u: np.ndarray
               ) -> tuple[PseudoLabels, str | None]:
        return cluster_share(z, labeled, in_u, self.prior, clusters_for(self.clusters, labeled),
                             self.max_iter, self.restarts, int(self.random_state or 0)), None


def clusters_for(clusters: int | str, labeled: np.ndarray) -> int:
    """`clusters`, or under auto one per LABELLED_PER_CLUSTER labelled positives (2 to
    MAX_CLUSTERS): a cluster's positive share is read off the labelled positives in it,
    and with fewer than about 20 of them that count is too noisy (a 2,000-row table with
    300 labelled positives: 0.96-0.98 of its rows right with 50 clusters, 1.0 with 15)."""
    if clusters != "auto":
        return int(clusters)
    return int(np.clip(int(labeled.sum()) // LABELLED_PER_CLUSTER, 2, MAX_CLUSTERS))
