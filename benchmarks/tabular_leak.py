"""The encoder's label leak in the tabular benchmark's cross-fitted estimates.

Reads the out-of-fold scores that `benchmarks/tabular.py` keeps for each choose fit
(reports/tabular/runs_scores/) and the hidden labels of the same training rows, and
prints per candidate: the TPR the estimate read on the labelled positives (`tpr_p`),
the TPR on U's unlabelled positives that it stands for (`tpr_u`), the estimate
(`val_est_accuracy`, from runs.csv) and the out-of-fold accuracy on U from its
hidden labels (`val_true`). With `--against NAME`, each candidate's paired difference
to NAME on the same table and seed (`pucl.evaluation.paired`, the choice's own rule)
beside the true difference of their out-of-fold accuracies on U, and whether the
interval holds it. The interval carries the prior's part at `--prior-error` (by default
`evaluate.prior_error`'s 0.03: the least the product allows, since a fit widens it
to its prior's own half-width, which runs.csv does not keep; 0 gives the rows' part
alone). A diagnostic: it reads labels and chooses nothing.

    .venv/bin/python benchmarks/tabular_leak.py --candidates NAME [NAME ...] [--csv F]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd
from tabular import CHOOSE, pu_rows, scores_file

from pucl.evaluation.paired import paired_difference
from pucl.recipe.settings import EvaluateParams

ROOT = Path(__file__).resolve().parents[1]


def leak_row(table: str, seed: int, method: str, folds: int, scope: str, out: Path
             ) -> dict | None:
    path = scores_file(out, table, seed, method, folds, scope)
    if not path.exists():
        return None
    rows = pd.read_csv(path)
    _, s, y, *_ = pu_rows(table, seed)
    hit = rows["score"].to_numpy() >= 0.5
    index = rows["index"].to_numpy()
    labelled, in_u = rows["pu"].to_numpy() == 1, rows["in_u"].to_numpy().astype(bool)
    truth = y[index]
    unlabelled_pos = in_u & ~labelled & (truth == 1)
    return {"table": table, "seed": seed, "method": method,
            "tpr_p": hit[labelled].mean(), "tpr_u": hit[unlabelled_pos].mean(),
            "val_true": (hit[in_u] == truth[in_u]).mean()}


def paired_rows(table: str, seed: int, method: str, against: str, prior: float,
                folds: int, scope: str, out: Path, prior_error: float) -> dict | None:
    """The paired difference `against` minus `method` and its truth on U, or None."""
    paths = [scores_file(out, table, seed, m, folds, scope) for m in (against, method)]
    if not all(path.exists() for path in paths):
        return None
    a, b = (pd.read_csv(path) for path in paths)
    _, _, y, *_ = pu_rows(table, seed)
    p, u = a["pu"].to_numpy() == 1, a["in_u"].to_numpy().astype(bool)
    score_a, score_b = a["score"].to_numpy(), b["score"].to_numpy()
    got = paired_difference(score_a[p], score_a[u], score_b[p], score_b[u], prior, seed=seed,
                            prior_error=prior_error)
    truth_u = y[a["index"].to_numpy()][u]
    true = ((score_a[u] >= 0.5) == truth_u).mean() - ((score_b[u] >= 0.5) == truth_u).mean()
    return {"table": table, "seed": seed, "method": method, "difference": got.value,
            "low": got.low, "high": got.high, "true_difference": true,
            "held": got.low <= true <= got.high}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", nargs="+", required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "tabular" / "runs.csv")
    parser.add_argument("--scope", default="classifier")
    parser.add_argument("--csv", type=Path, help="also write one row per fit here")
    parser.add_argument("--against", help="pair each candidate with this one")
    parser.add_argument("--prior-error", type=float,
                        default=EvaluateParams.model_fields["prior_error"].default,
                        help="the prior's 95%% half-width in the paired interval "
                        "(default: evaluate.prior_error's)")
    args = parser.parse_args()
    found = [leak_row(t, s, m, args.folds, args.scope, args.out) for m in args.candidates
             for t in CHOOSE for s in args.seeds]
    leaks = pd.DataFrame([row for row in found if row is not None])
    runs = pd.read_csv(args.out, low_memory=False)
    scoped = runs["settings"].astype(str).str.contains('"validation_scope"')
    runs = runs[(runs["role"] == "choose") & runs["settings"].astype(str).str.contains(
        f'"validation_folds": {args.folds}') & (scoped == (args.scope != "classifier"))]
    runs = runs.assign(method=runs["method"].str.removeprefix("pucl:"))
    est = runs.groupby(["table", "seed", "method"])["val_est_accuracy"].last().reset_index()
    leaks = leaks.merge(est, on=["table", "seed", "method"], how="left")
    leaks["leak"] = leaks["tpr_p"] - leaks["tpr_u"]
    leaks["miss"] = leaks["val_est_accuracy"] - leaks["val_true"]
    if args.csv:
        leaks.round(4).to_csv(args.csv, index=False)
    pd.set_option("display.width", 200)
    print(leaks.groupby("method")[["tpr_p", "tpr_u", "leak", "val_est_accuracy", "val_true",
                                   "miss"]].mean().round(4).to_string())
    print(leaks.pivot_table(index="table", columns="method", values="leak").round(3).to_string())
    if args.against:
        priors = runs.groupby(["table", "seed", "method"])["prior"].last()
        found = [paired_rows(t, s, m, args.against, priors[(t, s, args.against)], args.folds,
                             args.scope, args.out, args.prior_error)
                 for m in args.candidates if m != args.against
                 for t in CHOOSE for s in args.seeds if (t, s, args.against) in priors]
        pairs = pd.DataFrame([row for row in found if row is not None])
        if args.csv:
            pairs.round(4).to_csv(args.csv.with_name(args.csv.stem + "_pairs.csv"), index=False)
        pairs["width"] = pairs["high"] - pairs["low"]
        print(pairs.groupby("method").agg(
            pairs=("held", "size"), held=("held", "sum"), width=("width", "mean"),
            difference=("difference", "mean"), true_difference=("true_difference", "mean"),
        ).round(4).to_string())

if __name__ == "__main__":
    main()
