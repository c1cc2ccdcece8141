"""The class prior re-read from a cross-fitted classifier's own scores, against the truth.

    python benchmarks/prior_from_scores.py --task fmnist-i [--dataset fmnist] \
        reports/fmnist/honest_distpu_scores/*folds_2*.csv.gz \
        [--rows reports/fmnist/honest_distpu.csv]

With `split.folds`, every labelled positive and every row of U is scored by the fold
model that did not train on it, and `benchmarks/honest_rows.py` keeps those scores (one
gzip CSV per choosing run: dataset index, `pu`, `in_u`, score). BBE's best bin
(`pucl.prior.bins.best_bin`, at `prior.heldout`'s default gamma and delta) can then read
the prior from the fine-tuned classifier instead of the P-vs-U network the pipeline's
estimate used. Each file's U is labelled from the dataset's training labels and the
task's positive classes, so the table shows both priors' errors against U's true
positive share. Reads only; trains nothing.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from pucl.data.catalog import load_dataset
from pucl.data.tasks import get_task
from pucl.prior.bins import best_bin
from pucl.prior.heldout import HeldOutParams


def run_of(path: Path) -> tuple[str, int]:
    """(variant, seed) from `<preset>__<variant>__<settings>__s<seed>.csv.gz`, the name
    honest_rows.scores_path gives a run's kept scores."""
    parts = path.name.removesuffix(".csv.gz").split("__")
    return parts[1], int(parts[3].removeprefix("s"))


def prior_rows(paths: list[Path], dataset: str, task: str, root: str | None,
               rows: pd.DataFrame | None) -> pd.DataFrame:
    positive = get_task(task).binarize(load_dataset(dataset, root=root).y_train)
    settings = HeldOutParams()
    table = []
    for path in paths:
        variant, seed = run_of(path)
        scores = pd.read_csv(path, compression="gzip")
        in_u, labelled = scores["in_u"].to_numpy(bool), scores["pu"].to_numpy() == 1
        truth = float(positive[scores["index"].to_numpy()][in_u].mean())
        from_scores = best_bin(scores["score"].to_numpy()[labelled],
                               scores["score"].to_numpy()[in_u],
                               settings.gamma, settings.delta)[0]
        row = {"variant": variant, "seed": seed, "n_p": int(labelled.sum()),
               "n_u": int(in_u.sum()), "prior_true": truth,
               "bbe_on_scores": from_scores, "bbe_error": from_scores - truth}
        if rows is not None:
            match = rows[(rows["variant"] == variant) & (rows["seed"] == seed)
                         & (rows["role"] == "choose")]
            if len(match):
                row["pipeline_prior"] = float(match["prior_estimate"].iloc[-1])
                row["pipeline_error"] = row["pipeline_prior"] - truth
        table.append(row)
    return pd.DataFrame(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scores", nargs="+", type=Path, help="kept validation scores (gzip CSV)")
    parser.add_argument("--task", required=True, help="the task whose positives label U")
    parser.add_argument("--dataset", default="fmnist", help="the dataset the scores index")
    parser.add_argument("--root", default="data/raw", help="paths.data_root (the IDX files)")
    parser.add_argument("--rows", type=Path, default=None,
                        help="honest_rows.py's CSV, for the pipeline's own prior beside it")
    args = parser.parse_args()
    rows = pd.read_csv(args.rows) if args.rows else None
    table = prior_rows(args.scores, args.dataset, args.task, args.root, rows)
    if not len(table):
        raise SystemExit("no score files given")
    print(table.to_string(index=False, float_format="%.4f"))
    errors = table["bbe_error"]
    print(f"BBE on the classifier's scores: error mean {errors.mean():+.4f}, mean absolute "
          f"{errors.abs().mean():.4f}, sd {errors.std(ddof=0):.4f} over {len(table)} runs")
    if "pipeline_error" in table:
        own = table["pipeline_error"].dropna()
        print(f"the pipeline's prior: error mean {own.mean():+.4f}, mean absolute "
              f"{own.abs().mean():.4f} over {len(own)} runs")


if __name__ == "__main__":
    main()
