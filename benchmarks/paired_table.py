"""The paired difference against the truth: for each seed, the default run and each
variant on the same split, the difference of their label-free accuracies with its paired
bootstrap interval (pucl.evaluation.paired, as `pucl compare` and `pucl retrain` decide
by it), beside the true difference of the same two classifiers' accuracies on the same
rows of U (their hidden labels) and on the labelled test split.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/paired_table.py [--seeds 0 1 2]
        [--variants "classifier.objective=nnpu" ...] [--out reports/evaluation]

A variant is one or more KEY=VALUE overrides of params.yaml, joined by spaces. Variants
that change only the classifier reuse the default run's encoder through a pretraining
cache shared by the script's runs. Runs are in process with tracking off. Writes
`paired.csv` under --out after each pair (a rerun replaces its own variant and seed),
then `paired_seeds.csv`: each variant's difference over all its seeds at once, as `pucl
compare` pairs a group's seeds, beside the mean true difference. Prints how many
intervals hold the true difference.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("PUCL_TRACKING", "off")  # before pucl reads it

import pandas as pd  # noqa: E402
import yaml  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # _commit, run as a file
from _commit import TEXT_COLUMNS, current_commit, with_commit  # noqa: E402
from _pipeline import PipelineRun, RunsBar, run_once  # noqa: E402

KEY = ["variant", "seed"]
SCORES = ("evaluate", "validation_scores.csv")


def overrides_of(variant: str) -> dict:
    return {key: yaml.safe_load(value) for key, value in
            (item.split("=", 1) for item in variant.split())}


def paired_rows(a: PipelineRun, b: PipelineRun):
    """The two runs' validation scores as one paired part (pucl.reporting.paired_choice)."""
    from pucl.reporting.paired_choice import paired_part

    prior_a, prior_b = (run.metrics["val_prior"] for run in (a, b))
    error_a, error_b = (run.metrics.get("val_prior_error", 0.0) for run in (a, b))
    part = paired_part(a.kept, b.kept, prior_a, prior_b, error_a, error_b)
    if part is None:
        raise SystemExit("the two runs did not score the same rows, or one logged no prior: "
                         "a variant must keep the split")
    return part


def difference_row(parts: list, truths: list[float]) -> dict:
    """The paired difference over `parts` (one per seed, averaged as `pucl compare`
    averages a group's seeds) beside the mean of their true differences."""
    from pucl.evaluation.paired import paired_difference_over

    found, truth = paired_difference_over(parts), float(sum(truths) / len(truths))
    return {"difference": found.value, "low": found.low, "high": found.high,
            "true_difference": truth, "held": found.low <= truth <= found.high,
            "verdict": found.verdict()}


def pair_row(a: PipelineRun, b: PipelineRun) -> dict:
    """Default (a) minus variant (b): the paired estimate and its interval, the truth on
    the rows it read and on the test split."""
    truth = a.metrics["val_true_accuracy"] - b.metrics["val_true_accuracy"]
    return {**difference_row([paired_rows(a, b)], [truth]),
            "test_difference": a.metrics["accuracy"] - b.metrics["accuracy"],
            "est_a": a.metrics["val_est_accuracy"], "est_b": b.metrics["val_est_accuracy"],
            "val_folds": a.metrics.get("val_folds"), "n_val_p": a.metrics["val_n_p"],
            "n_val_u": a.metrics["val_n_u"], "minutes_a": a.minutes, "minutes_b": b.minutes}


def merge(frame: pd.DataFrame, path: Path, commit: str) -> pd.DataFrame:
    """path with these rows (a rerun replaces its own variant and seed)."""
    frame = with_commit(frame, commit)
    if path.exists():
        kept = pd.read_csv(path, keep_default_na=False, na_values=[""], dtype=TEXT_COLUMNS)
        fresh = frame.set_index(KEY).index
        frame = pd.concat([kept[~kept.set_index(KEY).index.isin(fresh)], frame],
                          ignore_index=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    frame = frame[KEY + [c for c in frame.columns if c not in KEY]]
    frame.sort_values(KEY).to_csv(path, index=False, float_format="%.4f")
    return frame


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--variants", nargs="+", default=["classifier.objective=nnpu"])
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "evaluation")
    args = parser.parse_args()
    commit = current_commit()  # the code the runs read, whatever changes while they run
    bar = RunsBar(len(args.seeds) * (1 + len(args.variants)), "paired")
    pooled: dict[str, tuple[list, list]] = {variant: ([], []) for variant in args.variants}
    with tempfile.TemporaryDirectory(prefix="paired-cache-") as cache:
        for seed in args.seeds:
            with bar.running(f"default seed {seed}"):
                default = run_once({}, seed, "paired-default", Path(cache), keep=SCORES)
            for variant in args.variants:
                with bar.running(f"{variant} seed {seed}"):
                    run = run_once(overrides_of(variant), seed, "paired-variant",
                                   Path(cache), keep=SCORES)
                row = {"variant": variant, "seed": seed, **pair_row(default, run)}
                pooled[variant][0].append(paired_rows(default, run))
                pooled[variant][1].append(row["true_difference"])
                frame = merge(pd.DataFrame([row]), args.out / "paired.csv", commit)
                bar.write(f"seed {seed}, default - ({variant}): {row['difference']:+.4f} "
                          f"[{row['low']:+.4f}, {row['high']:+.4f}], true "
                          f"{row['true_difference']:+.4f}, test {row['test_difference']:+.4f}")
    bar.close()
    over_seeds = pd.DataFrame([{"variant": variant, "seeds": " ".join(map(str, args.seeds)),
                                **difference_row(*pooled[variant])}
                               for variant in args.variants])
    with_commit(over_seeds, commit).to_csv(args.out / "paired_seeds.csv", index=False,
                                           float_format="%.4f")
    print(over_seeds.to_string(index=False))
    summary = frame.groupby("variant").agg(
        pairs=("seed", "count"), holding=("held", "sum"),
        mean_width=("high", "mean"), mean_true=("true_difference", "mean"))
    summary["mean_width"] -= frame.groupby("variant")["low"].mean()
    print(summary.to_string())


if __name__ == "__main__":
    main()
