"""BBE, Best Bin Estimation (Garg, Wu, Smola, Balakrishnan and Lipton, "Mixture
Proportion Estimation and PU Learning: A Modern Approach", NeurIPS 2021).

A classifier learns to tell labelled positives from unlabeled rows; on rows it did not
see, the share of U scoring above a threshold c, q_u(c), divided by the share of P above
it, q_p(c), bounds the prior from above, and equals it wherever the top bin holds
positives only. BBE takes the c that minimises an upper confidence bound of that ratio,

    q_u(c) / q_p(c) + (1 + gamma) / q_p(c) * (sqrt(log(4 / delta) / (2 n_p))
                                              + sqrt(log(4 / delta) / (2 n_u))),

and returns q_u(c) / q_p(c) there. The scores come from `heldout.heldout_scores` (a small
CNN on images by default, a logistic regression on a PCA otherwise). Each fold's model
gives its own estimate on its own held-out fold, as in the paper's single split, and the
folds' estimates are averaged (settings: params.yaml `prior.heldout`).
"""

from __future__ import annotations

import numpy as np

from pucl.prior.base import PRIOR_ESTIMATORS
from pucl.prior.bins import best_bin
from pucl.prior.heldout import HeldOutEstimator, HeldOutParams, HeldOutScores


def bbe_from_scores(scores: HeldOutScores, gamma: float, delta: float) -> tuple[float, dict]:
    """The mean over folds of each fold's best-bin estimate, and what each fold chose."""
    estimates, q_ps = [], []
    for k in range(scores.folds):
        estimate, _, q_p, _ = best_bin(scores.p[scores.fold_p == k],
                                       scores.u[scores.fold_u == k], gamma, delta)
        estimates.append(estimate)
        q_ps.append(q_p)
    return float(np.mean(estimates)), {
        "bbe_fold_estimates": [round(float(e), 6) for e in estimates],
        "bbe_q_p": float(np.mean(q_ps))}


@PRIOR_ESTIMATORS.register("bbe", params=HeldOutParams, params_key="heldout")
class BBE(HeldOutEstimator):
    """BBE (Garg et al., NeurIPS 2021): the top bin of held-out P-vs-U scores."""

    def _from_scores(self, scores: HeldOutScores) -> tuple[float, dict]:
        return bbe_from_scores(scores, self.gamma, self.delta)
