"""BBE, Best Bin Estimation (Garg, Wu, Smola, Balakrishnan and Lipton, "Mixture
Proportion Estimation and PU Learning: A Modern Approach", NeurIPS 2021).

A classifier learns to tell labelled positives from unlabeled rows on one part of each;
on the held-out parts, the share of U scoring above a threshold c, q_u(c), divided by the
share of P above it, q_p(c), bounds the prior from above wherever the top bin holds
positives only. BBE takes the c that minimises an upper confidence bound of that ratio,

    q_u(c) / q_p(c) + (1 + gamma) / q_p(c) * (sqrt(log(4 / delta) / (2 n_p))
                                              + sqrt(log(4 / delta) / (2 n_u))),

and returns q_u(c) / q_p(c) there. The classifier here is a logistic regression on a PCA
of the inputs fitted on the training parts (settings: params.yaml `prior.bbe`).
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import Field
from sklearn.decomposition import PCA
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

from pucl.prior.base import PRIOR_ESTIMATORS, PriorEstimator
from pucl.registry import EntryParams


class BBEParams(EntryParams):
    holdout: float = Field(0.5, gt=0.0, lt=1.0, description="share of P and of U held out")
    pca_dim: int = Field(50, ge=1, description="PCA components the classifier sees")
    C: float = Field(1.0, gt=0.0, description="inverse L2 strength of the logistic regression")
    gamma: float = Field(0.01, ge=0.0, description="slack of the bound (the paper's gamma)")
    delta: float = Field(0.1, gt=0.0, lt=1.0, description="confidence of the bound")


def best_bin(scores_p: np.ndarray, scores_u: np.ndarray, gamma: float, delta: float
             ) -> tuple[float, float, float, float]:
    """(estimate, threshold, q_p, q_u) of the bin that minimises the upper bound, over the
    thresholds at the held-out positives' scores."""
    n_p, n_u = len(scores_p), len(scores_u)
    sorted_p, sorted_u = np.sort(scores_p), np.sort(scores_u)
    thresholds = sorted_p[::-1]
    q_p = (n_p - np.searchsorted(sorted_p, thresholds, side="left")) / n_p  # share >= c
    q_u = (n_u - np.searchsorted(sorted_u, thresholds, side="left")) / n_u
    slack = (math.sqrt(math.log(4 / delta) / (2 * n_p))
             + math.sqrt(math.log(4 / delta) / (2 * n_u)))
    bound = q_u / q_p + (1 + gamma) / q_p * slack
    k = int(np.argmin(bound))
    return min(q_u[k] / q_p[k], 1.0), float(thresholds[k]), float(q_p[k]), float(q_u[k])


@PRIOR_ESTIMATORS.register("bbe", params=BBEParams)
class BBE(PriorEstimator):
    """BBE (Garg et al., NeurIPS 2021): the held-out top bin of a P-vs-U classifier."""

    min_samples = 10  # per side: at least 5 to train on and 5 to hold out

    def __init__(self, holdout: float = 0.5, pca_dim: int = 50, C: float = 1.0,
                 gamma: float = 0.01, delta: float = 0.1, random_state: int | None = 0):
        self.holdout = holdout
        self.pca_dim = pca_dim
        self.C = C
        self.gamma = gamma
        self.delta = delta
        self.random_state = random_state

    def _halves(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        order = rng.permutation(n)
        held = min(max(int(round(self.holdout * n)), 1), n - 1)
        return order[held:], order[:held]

    def _estimate(self, U: np.ndarray, P: np.ndarray) -> tuple[float, dict]:
        rng = np.random.default_rng(self.random_state)
        train_u, held_u = self._halves(len(U), rng)
        train_p, held_p = self._halves(len(P), rng)
        x_train = np.concatenate([P[train_p], U[train_u]])
        y_train = np.r_[np.ones(len(train_p)), np.zeros(len(train_u))]
        dim = min(self.pca_dim, x_train.shape[1], len(x_train))
        reduce = PCA(n_components=dim, random_state=0).fit(x_train)
        scale = StandardScaler().fit(reduce.transform(x_train))

        def features(x: np.ndarray) -> np.ndarray:
            return scale.transform(reduce.transform(x))

        scorer = LogisticRegression(C=self.C, class_weight="balanced", max_iter=2000)
        scorer.fit(features(x_train), y_train)
        scores_p = scorer.predict_proba(features(P[held_p]))[:, 1]
        scores_u = scorer.predict_proba(features(U[held_u]))[:, 1]
        prior, threshold, q_p, q_u = best_bin(scores_p, scores_u, self.gamma, self.delta)
        return prior, {"bbe_threshold": threshold, "bbe_q_p": q_p, "bbe_q_u": q_u,
                       "bbe_heldout_p": len(held_p), "bbe_heldout_u": len(held_u),
                       "bbe_pca_dim": dim}
