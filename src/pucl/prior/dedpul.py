"""DEDPUL, Difference of Estimated Densities (Ivanov, "DEDPUL: Difference-of-Estimated-
Densities-based Positive-Unlabeled Learning", ICMLA 2020).

U's density is pi f_p + (1 - pi) f_n, so f_u / f_p >= pi everywhere, with equality where
negatives are absent. DEDPUL reduces the inputs to one dimension, the held-out score s of
a P-vs-U classifier (heldout.py), where both densities can be estimated well:

1. Gaussian kernel densities of the scores of U and of P (bandwidths `bandwidth_u` and
   `bandwidth_p`, in standard deviations of each sample's scores).
2. The ratio r = f_p / f_u at each row of U, capped at 50, smoothed by a running median
   (11 rows, then a window of 5% of U) and made non-decreasing in s by an isotonic
   regression: a row that looks more positive never gets a smaller ratio. (The authors'
   code sorts the ratios instead, which lifts the noisiest peak to the top and biases the
   estimate low: 0.459 against 0.504 on Gaussian scores of prior 0.5, tests.)
3. A positive share pi implies positive posteriors min(1, pi r) for the rows of U; a
   consistent pi equals their mean. With a = 1 - pi (the negative share) and
   e(a) = mean(max(0, 1 - (1 - a) r)) - a:
   - fixed point: from a = 0, a <- mean(max(0, 1 - (1 - a) r)) until it moves less than
     1e-5 or no posterior is clipped any more: a_c;
   - kink: on a grid of step 0.001, where e is below 0.05, the a with the largest second
     difference of e: a_n;
   - a_c is kept when a_n >= a_c or when e is negative at more than one grid point (and
     a_c < 1 - step); else a_n. The estimate is 1 - a.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import gaussian_kde
from sklearn.isotonic import IsotonicRegression

from pucl.prior.base import PRIOR_ESTIMATORS
from pucl.prior.heldout import HeldOutEstimator, HeldOutParams, HeldOutScores

RATIO_CAP = 50.0
GRID = 1024  # points the kernel densities are evaluated at (then interpolated)
STEP = 0.001
MAX_GAP = 0.05
TOLERANCE = 1e-5
MAX_ITERATIONS = 1000


def density(samples: np.ndarray, bandwidth: float, at: np.ndarray) -> np.ndarray:
    """A Gaussian KDE of `samples` evaluated at `at`, through a grid (exact KDE on 60,000
    rows at 60,000 points would be 3.6e9 kernel terms)."""
    if np.ptp(samples) == 0:  # a constant sample: a narrow bump at its value
        samples = samples + np.linspace(-1e-6, 1e-6, len(samples))
    kde = gaussian_kde(samples, bw_method=bandwidth)
    width = float(np.sqrt(kde.covariance[0, 0]))
    grid = np.linspace(at.min() - 3 * width, at.max() + 3 * width, GRID)
    return np.interp(at, grid, kde(grid))


def running_median(values: np.ndarray, half_window: int) -> np.ndarray:
    return (pd.Series(values).rolling(2 * half_window + 1, center=True, min_periods=1)
            .median().to_numpy())


def density_ratio(scores_u: np.ndarray, scores_p: np.ndarray, bandwidth_u: float,
                  bandwidth_p: float) -> np.ndarray:
    """f_p / f_u at each row of U (in U's order), smoothed, non-decreasing in the score."""
    order = np.argsort(scores_u, kind="stable")
    s = scores_u[order]
    ratio = density(scores_p, bandwidth_p, s) / (density(scores_u, bandwidth_u, s) + 1e-5)
    ratio = np.minimum(ratio, RATIO_CAP)
    ratio = running_median(ratio, 5)
    ratio = running_median(ratio, max(1, len(s) // 20))
    monotone = np.empty_like(ratio)
    monotone[order] = IsotonicRegression().fit_transform(np.arange(len(s)), ratio)
    return monotone


def negative_share_gap(ratio: np.ndarray, a: np.ndarray | float) -> np.ndarray:
    """e(a) = mean negative posterior of U at negative share a, minus a."""
    a = np.atleast_1d(np.asarray(a, dtype=np.float64))
    posterior = np.maximum(0.0, 1.0 - (1.0 - a[:, None]) * ratio[None, :])
    return posterior.mean(axis=1) - a


def fixed_point(ratio: np.ndarray) -> float:
    a = 0.0
    for _ in range(MAX_ITERATIONS):
        posterior = np.maximum(0.0, 1.0 - (1.0 - a) * ratio)
        mean = float(posterior.mean())
        if abs(mean - a) < TOLERANCE or posterior.min() > 0:
            break
        a = mean
    return a


def kink(ratio: np.ndarray) -> tuple[float, np.ndarray]:
    grid = np.arange(0.0, 1.0, STEP)
    gaps = np.concatenate([negative_share_gap(ratio, chunk)
                           for chunk in np.array_split(grid, max(1, len(grid) // 50))])
    second = gaps[:-2] - 2 * gaps[1:-1] + gaps[2:]
    allowed = gaps[1:-1] < MAX_GAP
    if not allowed.any():
        return float(grid[int(np.argmin(gaps))]), gaps
    j = int(np.argmax(np.where(allowed, second, -np.inf)))
    return float(grid[j + 1]), gaps


def dedpul_from_scores(scores: HeldOutScores, bandwidth_u: float, bandwidth_p: float
                       ) -> tuple[float, dict]:
    ratio = density_ratio(scores.u, scores.p, bandwidth_u, bandwidth_p)
    a_c = fixed_point(ratio)
    a_n, gaps = kink(ratio)
    keep_fixed = a_n >= a_c or ((gaps < 0).sum() > 1 and a_c < 1 - STEP)
    a = a_c if keep_fixed else a_n
    return float(1.0 - a), {"dedpul_fixed_point": 1.0 - a_c, "dedpul_kink": 1.0 - a_n,
                            "dedpul_rule": "fixed_point" if keep_fixed else "kink",
                            "dedpul_max_ratio": float(ratio.max())}


@PRIOR_ESTIMATORS.register("dedpul", params=HeldOutParams, params_key="heldout")
class DEDPUL(HeldOutEstimator):
    """DEDPUL (Ivanov, ICMLA 2020): f_u / f_p of held-out P-vs-U scores, at its minimum."""

    # its density estimates cost about 0.5 s a draw at F-MNIST's 54,000 rows of U (100
    # draws: 85 s on 2 shared cores, against 0.1 s for BBE): 20 draws bound the cost
    max_bootstrap = 20

    def _from_scores(self, scores: HeldOutScores) -> tuple[float, dict]:
        return dedpul_from_scores(scores, self.bandwidth_u, self.bandwidth_p)
