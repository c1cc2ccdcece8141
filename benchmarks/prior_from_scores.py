"""The class prior re-read from a cross-fitted classifier's own scores, against the truth.

    python benchmarks/prior_from_scores.py reports/fmnist/honest_distpu.csv \
        [--preset fmnist-i] [--settings split.folds=2] [--root data/raw]

With `split.folds`, every labelled positive and every row of U is scored by the fold
model that did not train on it, and `benchmarks/honest_rows.py` keeps those scores beside
its rows (one gzip CSV per choosing run: dataset index, `pu`, `in_u`, score). BBE's best
bin (`pucl.prior.bins.best_bin`, at `prior.heldout`'s default gamma and delta) can then
read the prior from the fine-tuned classifier instead of the P-vs-U network whose
estimate the run used (`prior_estimate`). Each run's U is labelled from its preset's
dataset and task, so the table shows both priors' errors against U's true positive share.
Reads only; trains nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from pucl.data.catalog import load_dataset
from pucl.data.tasks import get_task
from pucl.params.presets import load_preset
from pucl.prior.bins import best_bin
from pucl.prior.heldout import HeldOutParams

sys.path.insert(0, str(Path(__file__).resolve().parent))  # honest_rows, run as a file
from honest_rows import scores_path  # noqa: E402


def prior_rows(out: Path, preset: str | None, settings: str | None,
               root: str | None) -> pd.DataFrame:
    """One line per choosing run of `out` whose scores were kept: U's true prior, BBE on
    the run's out-of-fold scores, and the run's own prior estimate."""
    runs = pd.read_csv(out)
    runs = runs[(runs["role"] == "choose")
                & (runs["preset"] == preset if preset else True)
                & (runs["settings"].str.contains(settings, regex=False) if settings else True)]
    gamma, delta = HeldOutParams().gamma, HeldOutParams().delta
    positives: dict[str, pd.Series] = {}  # preset -> its task's labels of the training rows
    table = []
    for run in runs.itertuples(index=False):
        path = scores_path(out, run.preset, run.variant, run.settings, int(run.seed))
        if not path.exists():
            continue
        if run.preset not in positives:
            data = load_preset(run.preset).set
            labels = load_dataset(data["data.dataset"], root=root).y_train
            positives[run.preset] = get_task(data["data.task"]).binarize(labels)
        scores = pd.read_csv(path, compression="gzip")
        in_u, labelled = scores["in_u"].to_numpy(bool), scores["pu"].to_numpy() == 1
        truth = float(positives[run.preset][scores["index"].to_numpy()][in_u].mean())
        read = best_bin(scores["score"].to_numpy()[labelled], scores["score"].to_numpy()[in_u],
                        gamma, delta)[0]
        table.append({"preset": run.preset, "variant": run.variant, "seed": int(run.seed),
                      "n_p": int(labelled.sum()), "n_u": int(in_u.sum()),
                      "prior_true": truth, "bbe_on_scores": read, "bbe_error": read - truth,
                      "run_prior": run.prior_estimate,
                      "run_prior_error": run.prior_estimate - truth})
    return pd.DataFrame(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", type=Path, help="honest_rows.py's CSV (its scores beside it)")
    parser.add_argument("--preset", default=None, help="only this preset's runs")
    parser.add_argument("--settings", default=None,
                        help="only runs whose settings contain this, e.g. split.folds=2")
    parser.add_argument("--root", default="data/raw", help="paths.data_root (the IDX files)")
    args = parser.parse_args()
    if not args.rows.is_file():
        parser.error(f"rows file {args.rows} not found (honest_rows.py's --out)")
    table = prior_rows(args.rows, args.preset, args.settings, args.root)
    if not len(table):
        raise SystemExit(f"no choosing run of {args.rows} has kept scores"
                         + (f" under settings {args.settings!r}" if args.settings else ""))
    print(table.to_string(index=False, float_format="%.4f"))
    for column, what in (("bbe_error", "BBE on the classifier's scores"),
                         ("run_prior_error", "the runs' own prior")):
        errors = table[column]
        print(f"{what}: error mean {errors.mean():+.4f}, mean absolute "
              f"{errors.abs().mean():.4f}, sd {errors.std(ddof=0):.4f} over {len(table)} runs")


if __name__ == "__main__":
    main()
