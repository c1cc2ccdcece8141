"""The accuracy intervals of reports/evaluation/runs.csv read again with today's rule
(`pucl.evaluation.label_free.Estimate.interval`), from what each row recorded: the
estimate, its interval, the prior it read and TPR on the labelled positives. Rows older
than 2026-11-28 hold the bootstrap interval with the prior's part added; both parts are
recovered exactly (the prior's ends follow from TPR, r = 1 - pi + 2 pi TPR - estimate and
the prior error), then combined as the rule combines them now.

    python benchmarks/reread_intervals.py [--runs reports/evaluation/runs.csv]
        [--prior-error 0.03]

Prints, per case and settings, the intervals' mean width and how many hold the truth, as
recorded (added) and as read again (combined). A row whose prior carried a half-width
above --prior-error read that instead; the rows do not say, so those rows are approximate.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from pucl.evaluation.label_free import Estimate, accuracy_on_u

ROOT = Path(__file__).resolve().parents[1]


def reread(row: pd.Series, prior_error: float) -> tuple[float, float]:
    """(low, high) of the row's accuracy interval under today's rule."""
    prior, tpr, value = row["prior_est"], row["tpr_p"], row["est_accuracy"]
    r = 1.0 - prior + 2.0 * prior * tpr - value
    ends = [float(accuracy_on_u(tpr, r, prior + d)) for d in (-prior_error, prior_error)]
    shifts = (ends[0] - value, ends[1] - value)
    low = row["est_low"] - min(0.0, *shifts)  # the bootstrap interval, as it was before
    high = row["est_high"] - max(0.0, *shifts)
    return Estimate(value, low, high, *ends).interval()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, default=ROOT / "reports/evaluation/runs.csv")
    parser.add_argument("--prior-error", type=float, default=0.03)
    args = parser.parse_args()
    runs = pd.read_csv(args.runs).dropna(subset=["tpr_p", "true_accuracy"])
    both = np.array([reread(row, args.prior_error) for _, row in runs.iterrows()])
    runs = runs.assign(
        width=runs["est_high"] - runs["est_low"], now_width=both[:, 1] - both[:, 0],
        now_held=(both[:, 0] <= runs["true_accuracy"]) & (runs["true_accuracy"] <= both[:, 1]))
    table = runs.groupby(["task", "settings"]).agg(
        runs=("seed", "size"), held=("held", "sum"), width=("width", "mean"),
        now_held=("now_held", "sum"), now_width=("now_width", "mean"),
        miss=("abs_difference", "mean"))
    print(table.round(3).to_string())


if __name__ == "__main__":
    main()
