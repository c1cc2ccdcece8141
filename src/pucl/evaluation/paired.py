"""The difference between two classifiers' label-free accuracies on the same held-out
rows, with a paired bootstrap interval: which of two models is better, from P and U alone.

Both models are scored on one held-out part: the same labelled positives P and the same
unlabeled rows U, with one prior pi. With accuracy on U = 1 - pi - r + 2 pi TPR
(pucl.evaluation.label_free), the difference is

    acc_a - acc_b = (r_b - r_a) + 2 pi (TPR_a - TPR_b),

so the prior's `1 - pi` cancels and the rows both models predict alike add nothing: its
noise comes only from the rows where they disagree. The difference is taken in that
linear form, an identity on the held-out U given its prior, without the clip at
FPR >= 0 that a single estimate applies (pucl.evaluation.label_free): where a prior that
errs high drives a model's FPR below 0, the clip drops U's rows from its accuracy, so two
models that differ on U only would read level, and it narrows the bootstrap's spread.
On the tabular benchmark's 63 recipe-fold pairs the clipped form's intervals held the
out-of-fold truth in 49 (68% of the pairs clipped a model), the linear form's in 57.

The interval resamples P and U (apart, seeded) and applies each draw to both models at
once; it is far narrower than the two models' own intervals side by side, which is what
lets it rank close variants.

The prior does not cancel whole: a prior off by d moves the difference by
2 d (TPR_a - TPR_b). With a `prior_error` (the prior's 95% half-width) that part joins
the bootstrap's as an independent error, on each side the root of the sum of the two
squares, as a single estimate's interval does (pucl.evaluation.label_free). Over several
parts the prior's shifts add up as one error, not as independent ones: an estimator's
bias is the same on every seed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pucl.evaluation import label_free


@dataclass(frozen=True)
class Difference:
    """acc_a - acc_b and its percentile interval."""

    value: float
    low: float
    high: float

    def verdict(self, margin: float = 0.0) -> str:
        """"a" when the whole interval lies above `margin`, "b" when below -margin, else
        "tie": the held-out rows cannot tell the two apart."""
        if self.low > margin:
            return "a"
        if self.high < -margin:
            return "b"
        return "tie"


@dataclass(frozen=True)
class PairedRows:
    """Two models' scores of one held-out part: p_a / p_b of the same labelled positives
    (row for row), u_a / u_b of the same U, and the prior both read."""

    p_a: np.ndarray
    u_a: np.ndarray
    p_b: np.ndarray
    u_b: np.ndarray
    prior: float
    prior_error: float = 0.0  # the prior's 95% half-width; 0: the prior taken as exact


def paired_difference(p_a: np.ndarray, u_a: np.ndarray, p_b: np.ndarray, u_b: np.ndarray,
                      prior: float, threshold: float = 0.5, bootstrap: int = 1000,
                      level: float = 0.95, seed: int = 0, prior_error: float = 0.0
                      ) -> Difference:
    """Model a's estimated accuracy minus model b's: p_a / p_b their scores of the same
    held-out labelled positives (row for row), u_a / u_b of the same held-out U."""
    return paired_difference_over([PairedRows(p_a, u_a, p_b, u_b, prior, prior_error)],
                                  threshold, bootstrap, level, seed)


def paired_difference_over(parts: list[PairedRows], threshold: float = 0.5,
                           bootstrap: int = 1000, level: float = 0.95, seed: int = 0
                           ) -> Difference:
    """The mean over several held-out parts (one per seed, say) of a's accuracy minus
    b's, each part resampled on its own in every draw of the interval."""
    if not parts:
        raise ValueError("need at least one held-out part")
    rng = np.random.default_rng(seed)
    values, draws, shifts = zip(*(_one_part(part, threshold, bootstrap, rng)
                                  for part in parts), strict=True)
    value = float(np.mean(values))
    if not bootstrap:
        return Difference(value, np.nan, np.nan)
    tail = (1.0 - level) / 2.0 * 100
    low, high = np.percentile(np.mean(draws, axis=0), [tail, 100 - tail])
    prior_part = abs(float(np.mean(shifts)))  # the mean's move with every prior at its end
    if prior_part == 0.0:  # the bootstrap's interval as it is, to the last digit
        return Difference(value, float(low), float(high))
    return Difference(value, value - float(np.hypot(max(value - low, 0.0), prior_part)),
                      value + float(np.hypot(max(high - value, 0.0), prior_part)))


def _one_part(part: PairedRows, threshold: float, bootstrap: int,
              rng: np.random.Generator) -> tuple[float, np.ndarray, float]:
    """One part's difference, its `bootstrap` resampled differences and how far the
    difference moves with the prior at prior + prior_error."""
    p_a, p_b, u_a, u_b = (np.asarray(v, float) for v in (part.p_a, part.p_b, part.u_a,
                                                          part.u_b))
    prior = part.prior
    if p_a.shape != p_b.shape or u_a.shape != u_b.shape:
        raise ValueError(f"the two models must score the same rows, got P {p_a.shape} and "
                         f"{p_b.shape}, U {u_a.shape} and {u_b.shape}")
    if len(p_a) == 0 or len(u_a) == 0:
        raise ValueError(f"need held-out P and U scores, got {len(p_a)} and {len(u_a)} rows")
    hits_p = np.stack([p_a >= threshold, p_b >= threshold])  # [model, row]
    hits_u = np.stack([u_a >= threshold, u_b >= threshold])
    tpr_full = hits_p.mean(axis=-1)
    full = _difference(tpr_full, hits_u.mean(axis=-1), prior)
    # all of P's resamples are drawn before U's, as one [draws, rows] block each would be
    tpr = _resampled_means(hits_p, bootstrap, rng)
    r = _resampled_means(hits_u, bootstrap, rng)
    return (float(full), _difference(tpr, r, prior),
            float(2.0 * part.prior_error * (tpr_full[0] - tpr_full[1])))


def _difference(tpr: np.ndarray, r: np.ndarray, prior: float) -> np.ndarray:
    """acc_a - acc_b = (r_b - r_a) + 2 pi (TPR_a - TPR_b) from [model, ...] rates: the
    module's linear form, with no clip of either model's FPR."""
    return (r[1] - r[0]) + 2.0 * prior * (tpr[0] - tpr[1])


def _resampled_means(hits: np.ndarray, draws: int, rng: np.random.Generator) -> np.ndarray:
    """[model, draw]: each model's mean of `hits` ([model, row]) over `draws` resamples of
    the rows with replacement, the same rows for every model. The resamples are drawn in
    slices of rows, which gives the same numbers as one block (numpy's bounded integers
    come from one stream whatever the call's shape)."""
    n = hits.shape[1]
    means = np.empty((hits.shape[0], draws))
    per_slice = max(1, label_free.RESAMPLE_CELLS // n)
    for start in range(0, draws, per_slice):
        size = min(per_slice, draws - start)
        means[:, start:start + size] = hits[:, rng.integers(0, n, (size, n))].mean(axis=-1)
    return means
