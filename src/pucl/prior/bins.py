"""BBE's best bin (bbe.py has the paper and the formula), on its own so that the held-out
scorer's CVIR rounds (heldout.py) can read it too."""

from __future__ import annotations

import math

import numpy as np


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
