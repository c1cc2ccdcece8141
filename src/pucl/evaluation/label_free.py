"""Label-free metrics: how good a classifier is on U's distribution, from scores on
held-out labelled positives (P) and unlabeled rows (U) and U's class prior pi alone.

Under SCAR the labelled positives are a sample of the positives, so for a rule
`score >= threshold`:
- TPR = P(predicted 1 | y = 1) is read on held-out P;
- r = P_U(predicted 1) is read on held-out U;
- FPR = (r - pi TPR) / (1 - pi), since r = pi TPR + (1 - pi) FPR;
- accuracy on U = pi TPR + (1 - pi)(1 - FPR) = 1 - pi - r + 2 pi TPR;
- precision = pi TPR / r, recall = TPR; balanced error = (1 - TPR + FPR) / 2;
- AUC(P vs U) = (1 - pi) AUC(P vs N) + pi / 2, so AUC(P vs N) = (AUC_PU - pi / 2) / (1 - pi).

Each estimate comes with a percentile bootstrap interval over the held-out rows (P and U
resampled apart, seeded) and with its values at pi -+ `prior_error` (the prior's 95%
half-width), the part of the error that comes from the prior: a prior off by d moves the
accuracy by (2 TPR - 1) d. The two parts combine as independent errors (`Estimate.interval`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import norm, rankdata

from pucl.evaluation.metrics import classification_metrics

METRICS = ("accuracy", "balanced_error", "precision", "recall", "f1", "roc_auc")


def _rates(p_scores: np.ndarray, u_scores: np.ndarray, threshold: float
           ) -> tuple[float, float]:
    return float((p_scores >= threshold).mean()), float((u_scores >= threshold).mean())


def auc_p_vs_u(p_scores: np.ndarray, u_scores: np.ndarray) -> float:
    """P(a P score > a U score), ties counted half (Mann-Whitney)."""
    ranks = rankdata(np.concatenate([p_scores, u_scores]))
    n_p, n_u = len(p_scores), len(u_scores)
    return float((ranks[:n_p].sum() - n_p * (n_p + 1) / 2) / (n_p * n_u))


def false_positive_rate(tpr, r, prior: float):
    """FPR from TPR and U's positive rate r (numbers or arrays), clipped to [0, 1]: a
    finite sample or a wrong prior can push it outside."""
    return np.clip((r - prior * np.asarray(tpr)) / (1.0 - prior), 0.0, 1.0)


def accuracy_on_u(tpr, r, prior: float):
    """Accuracy on U's distribution from TPR and r (numbers or arrays)."""
    return prior * np.asarray(tpr) + (1.0 - prior) * (1.0 - false_positive_rate(tpr, r, prior))


def point_estimates(p_scores: np.ndarray, u_scores: np.ndarray, prior: float,
                    threshold: float = 0.5) -> dict[str, float]:
    """Every metric of METRICS on U's distribution, from the three numbers above (rates
    clipped to [0, 1]: a finite sample or a wrong prior can push FPR outside)."""
    tpr, r = _rates(p_scores, u_scores, threshold)
    metrics = _metrics_of_rates(np.array(tpr), np.array(r),
                                np.array(auc_p_vs_u(p_scores, u_scores)), prior)
    return {name: float(value) for name, value in metrics.items()}


@dataclass(frozen=True)
class Estimate:
    """One label-free metric: its value, a bootstrap interval over the held-out rows and
    its values at the prior's ends (prior - error, prior + error)."""

    value: float
    low: float
    high: float
    at_prior_low: float
    at_prior_high: float

    def interval(self) -> tuple[float, float]:
        """The bootstrap interval and the prior's part, combined as two independent errors
        with 95% half-widths of their own: on each side the root of the sum of the two
        squares (a prior end that moves the estimate the other way adds nothing on that
        side), kept inside [0, 1]. Adding the two parts instead would cover their worst
        cases at once, wider than a 95% interval needs (docs/evaluation.md)."""
        shifts = (self.at_prior_low - self.value, self.at_prior_high - self.value)
        down = np.hypot(max(self.value - self.low, 0.0), max(0.0, -min(shifts)))
        up = np.hypot(max(self.high - self.value, 0.0), max(0.0, *shifts))
        return max(self.value - float(down), 0.0), min(self.value + float(up), 1.0)


def estimate_metrics(p_scores: np.ndarray, u_scores: np.ndarray, prior: float,
                     threshold: float = 0.5, prior_error: float = 0.0,
                     bootstrap: int = 200, level: float = 0.95, seed: int = 0
                     ) -> dict[str, Estimate]:
    """Estimates of METRICS with their intervals (see the module's docstring)."""
    p_scores, u_scores = np.asarray(p_scores, float), np.asarray(u_scores, float)
    if not 0.0 < prior < 1.0:
        raise ValueError(f"prior must be in (0, 1), got {prior}")
    if len(p_scores) == 0 or len(u_scores) == 0:
        raise ValueError(f"need held-out P and U scores, got {len(p_scores)} and "
                         f"{len(u_scores)} rows")
    point = point_estimates(p_scores, u_scores, prior, threshold)
    draws = _bootstrap(p_scores, u_scores, prior, threshold, bootstrap, seed)
    ends = [point_estimates(p_scores, u_scores, min(max(prior + d, 1e-6), 1 - 1e-6),
                            threshold) for d in (-prior_error, prior_error)]
    tail = (1.0 - level) / 2.0 * 100
    out = {}
    for name in METRICS:
        low, high = (np.percentile(draws[name], [tail, 100 - tail]) if bootstrap
                     else (np.nan,) * 2)
        out[name] = Estimate(point[name], float(low), float(high), ends[0][name],
                             ends[1][name])
    return out


# resampled rows a bootstrap holds in memory at once (here and in paired): a million-row
# U resamples in slices
RESAMPLE_CELLS = 4_000_000


def _bootstrap(p_scores: np.ndarray, u_scores: np.ndarray, prior: float,
               threshold: float, bootstrap: int, seed: int) -> dict[str, np.ndarray]:
    """point_estimates on `bootstrap` resamples of P and U (drawn apart, with
    replacement), as arrays over the draws. Each resample is held as the count of each
    row in it, so no score is sorted again: a P row's share of the AUC is the count of
    U drawn below it (plus half of those tied), read off a running sum of U's counts in
    score order. The draws are those of `rng.choice` per resample, so intervals are the
    same numbers a loop over point_estimates gives."""
    rng = np.random.default_rng(seed)
    n_p, n_u = len(p_scores), len(u_scores)
    order = np.argsort(u_scores, kind="stable")
    below, up_to = (np.searchsorted(u_scores[order], p_scores, side=side)
                    for side in ("left", "right"))
    hit_p = (p_scores >= threshold).astype(float)
    hit_u = (u_scores >= threshold).astype(float)
    per_slice = max(1, RESAMPLE_CELLS // (n_p + n_u))
    tpr, r, pairs = (np.empty(bootstrap) for _ in range(3))
    for start in range(0, bootstrap, per_slice):
        size = min(per_slice, bootstrap - start)
        rows = [(rng.integers(0, n_p, n_p), rng.integers(0, n_u, n_u)) for _ in range(size)]
        count_p = _counts([p for p, _ in rows], n_p)
        count_u = _counts([u for _, u in rows], n_u)
        cumulative = np.zeros((size, n_u + 1))
        np.cumsum(count_u[:, order], axis=1, out=cumulative[:, 1:])
        less, tied = cumulative[:, below], cumulative[:, up_to] - cumulative[:, below]
        span = slice(start, start + size)
        pairs[span] = (count_p * (less + 0.5 * tied)).sum(axis=1)
        tpr[span], r[span] = count_p @ hit_p / n_p, count_u @ hit_u / n_u
    return _metrics_of_rates(tpr, r, pairs / (n_p * n_u), prior)


def _counts(rows: list[np.ndarray], n: int) -> np.ndarray:
    """How often each of n rows appears in each resample: [resamples, n]."""
    offsets = np.arange(len(rows))[:, None] * n
    return np.bincount((np.stack(rows) + offsets).ravel(),
                       minlength=len(rows) * n).reshape(len(rows), n).astype(float)


def _metrics_of_rates(tpr: np.ndarray, r: np.ndarray, auc_pu: np.ndarray, prior: float
                      ) -> dict[str, np.ndarray]:
    """point_estimates' formulas over arrays of TPR, r and AUC(P vs U)."""
    fpr = false_positive_rate(tpr, r, prior)
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = np.where(r > 0, np.minimum(prior * tpr / r, 1.0), 0.0)
        f1 = np.where(precision + tpr > 0, 2 * precision * tpr / (precision + tpr), 0.0)
    auc = (auc_pu - prior / 2.0) / (1.0 - prior)
    return {"accuracy": accuracy_on_u(tpr, r, prior), "balanced_error": (1.0 - tpr + fpr) / 2.0,
            "precision": precision, "recall": tpr, "f1": f1,
            "roc_auc": np.minimum(np.maximum(auc, 0.0), 1.0)}


def accuracy_halfwidth(n_p: int, n_u: int, prior: float, tpr: float = 0.9,
                       fpr: float = 0.1, level: float = 0.95, prior_error: float = 0.0
                       ) -> float:
    """How far, at `level`, the accuracy estimate of a model with this TPR and FPR strays
    from the truth on `n_p` held-out labelled positives and `n_u` unlabeled rows drawn
    apart, with a prior whose own 95% half-width is `prior_error` (a normal approximation
    of `Estimate.interval`): accuracy = 1 - pi - r + 2 pi TPR, so the rows' part has the
    variance Var(r) + 4 pi^2 Var(TPR), with r = pi TPR + (1 - pi) FPR, and a prior off by
    d moves the estimate by (2 TPR - 1) d; the two parts combine as independent errors.
    For sizing a holdout before any model exists, and for the narrowest interval a data
    set allows (docs/evaluation.md). Where a prior end pushes FPR out of [0, 1] the
    estimate is clipped there and moves less."""
    r = prior * tpr + (1.0 - prior) * fpr
    variance = r * (1.0 - r) / n_u + 4.0 * prior ** 2 * tpr * (1.0 - tpr) / n_p
    rows = norm.ppf(0.5 + level / 2.0) * np.sqrt(variance)
    return float(np.hypot(rows, abs(2.0 * tpr - 1.0) * prior_error))


# metrics.json's validation estimates: its name -> the metric of METRICS it reports
VALIDATION_METRICS = {"accuracy": "accuracy", "auc": "roc_auc", "f1": "f1"}


def validation_metrics(p_scores: np.ndarray, u_scores: np.ndarray, prior: float,
                       prior_error: float, y_u: np.ndarray | None = None, seed: int = 0
                       ) -> dict[str, float]:
    """The validation part's entries of metrics.json: `val_est_<name>` for each name of
    VALIDATION_METRICS with `_low` / `_high` (Estimate.interval), the held-out counts
    `val_n_p` / `val_n_u`, the prior they read (`val_prior`) and the error allowed it
    (`val_prior_error`, which a paired difference reads too); and, where every member of
    the held-out U has a known label, `val_true_<name>`: the same metric from those labels
    (an oracle check of the estimate, never an input to it)."""
    estimates = estimate_metrics(p_scores, u_scores, prior, prior_error=prior_error,
                                 seed=seed)
    tpr, r = _rates(np.asarray(p_scores, float), np.asarray(u_scores, float), 0.5)
    out: dict[str, float] = {"val_n_p": len(p_scores), "val_n_u": len(u_scores),
                             "val_prior": prior, "val_prior_error": prior_error,
                             "val_tpr": tpr, "val_positive_rate": r}
    for name, metric in VALIDATION_METRICS.items():
        low, high = estimates[metric].interval()
        out.update({f"val_est_{name}": estimates[metric].value,
                    f"val_est_{name}_low": low, f"val_est_{name}_high": high})
    if y_u is not None and len(y_u) and (np.asarray(y_u) >= 0).all():
        y_u, u_scores = np.asarray(y_u), np.asarray(u_scores, float)
        truth = classification_metrics(y_u, u_scores)
        out.update({f"val_true_{name}": truth[metric]
                    for name, metric in VALIDATION_METRICS.items()})
        # what the estimate's two readings stand for: U's positive share and the TPR on
        # its positives (error_parts splits a miss between them)
        out.update(val_true_prior=float(y_u.mean()),
                   val_true_tpr=float((u_scores[y_u == 1] >= 0.5).mean())
                   if (y_u == 1).any() else float("nan"))
    return out


def error_parts(prior: float, tpr: float, true_prior: float, true_tpr: float
                ) -> tuple[float, float]:
    """The accuracy estimate's miss (estimate - the held-out U's true accuracy, before
    clipping) as (the prior's part, the held-out P's part). With accuracy = 1 - pi - r +
    2 pi TPR on both sides and r shared, the miss is (pi - pi_u)(2 TPR - 1) +
    2 pi_u (TPR - TPR_u): pi_u and TPR_u are the held-out U's positive share and TPR on
    its positives."""
    return (prior - true_prior) * (2 * tpr - 1), 2 * true_prior * (tpr - true_tpr)


def drop_alert(estimate: Estimate, reference: float, what: str) -> str | None:
    """One line when the estimate's whole interval lies below `reference` (what the same
    model scored before), else None: a drop the rows' chance and the prior's error do not
    explain."""
    low, high = estimate.interval()
    if high >= reference:
        return None
    return (f"{what}: estimated accuracy {estimate.value:.4f} [{low:.4f}, {high:.4f}] is "
            f"below the {reference:.4f} it scored on the holdout")
