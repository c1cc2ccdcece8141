"""Label-free validation estimates against the truth: for each case and seed, a whole
pipeline run, then its `val_est_accuracy` (from held-out P, U and the pipeline's own
prior estimate) beside the true accuracy of the same classifier on the validation part's
U (its hidden labels).

    OMP_WAIT_POLICY=PASSIVE python benchmarks/evaluation_table.py [--cases mnist5k]
        [--seeds 0 1 2] [--set KEY=VALUE ...] [--out reports/evaluation]

Cases: `mnist5k` (the default params, embedded data) and the F-MNIST presets' default
variants (`fmnist-i`, `fmnist-ii`: Fashion-MNIST's IDX files, paths.data_root). Each run
is in process with tracking off, in a temporary directory. Writes `runs.csv` under --out
after each run (one row per case, settings and seed; a rerun replaces its own rows,
others stay), and prints the mean absolute difference and how many intervals hold the
truth, per case and settings.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("PUCL_TRACKING", "off")  # before pucl reads it

import pandas as pd  # noqa: E402
import yaml  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # _commit, run as a file
from _commit import TEXT_COLUMNS, current_commit, with_commit  # noqa: E402
from _pipeline import RunsBar, run_once  # noqa: E402

# case: (preset whose default variant it runs, or None for params.yaml as it is)
CASES = {"mnist5k": None, "fmnist-i": "fmnist-i", "fmnist-ii": "fmnist-ii"}
KEY = ["task", "settings", "seed"]  # settings: the --set overrides, "default" without


def case_overrides(case: str) -> dict:
    preset = CASES[case]
    if preset is None:
        return {}
    from pucl.params.presets import load_preset
    from pucl.params.sweeps import variant_overrides

    return variant_overrides(load_preset(preset), None)[1]


def run_case(case: str, overrides: dict, seed: int) -> dict:
    run = run_once(overrides, seed, f"evaluation-{case}")
    metrics, summary, minutes = run.metrics, run.split, run.minutes
    return {"task": case, "seed": seed, "prior_true": metrics["prior_true"],
            "prior_est": metrics["prior_estimate"],
            # of the rows the truth reads (cross-fitting holds no part: every row of U)
            "prior_val_true": summary.get("prior_val_true", metrics["val_true_prior"]),
            "est_accuracy": metrics["val_est_accuracy"],
            "est_low": metrics["val_est_accuracy_low"],
            "est_high": metrics["val_est_accuracy_high"],
            "true_accuracy": metrics["val_true_accuracy"],
            "abs_difference": abs(metrics["val_est_accuracy"] - metrics["val_true_accuracy"]),
            "held": metrics["val_est_accuracy_low"] <= metrics["val_true_accuracy"]
            <= metrics["val_est_accuracy_high"],
            "n_val_p": metrics["val_n_p"], "n_val_u": metrics["val_n_u"],
            "tpr_p": metrics["val_tpr"], "tpr_u": metrics["val_true_tpr"],
            **miss_parts(metrics), "test_accuracy": metrics["accuracy"], "minutes": minutes,
            "stage_minutes": run.stage_minutes_json()}


def miss_parts(metrics: dict) -> dict:
    """The estimate's miss in three parts that sum to it: the prior's, the held-out P's
    (its TPR, tpr_p, standing for the TPR on U's positives, tpr_u; pu_metrics.error_parts)
    and the clipping's (a false-positive rate estimated outside [0, 1] is read at its end)."""
    from pucl.evaluation.label_free import error_parts

    if metrics.get("val_true_tpr") is None:  # a held-out U without positives: no TPR_u
        return {"prior_part": None, "tpr_part": None, "clip_part": None}
    prior_part, tpr_part = error_parts(metrics["val_prior"], metrics["val_tpr"],
                                       metrics["val_true_prior"], metrics["val_true_tpr"])
    miss = metrics["val_est_accuracy"] - metrics["val_true_accuracy"]
    return {"prior_part": prior_part, "tpr_part": tpr_part,
            "clip_part": miss - prior_part - tpr_part}


def merge(frame: pd.DataFrame, out: Path, commit: str) -> pd.DataFrame:
    """out/runs.csv with these rows (a rerun replaces its own case and seed)."""
    path = out / "runs.csv"
    frame = with_commit(frame, commit)
    if path.exists():
        kept = pd.read_csv(path, keep_default_na=False, na_values=[""], dtype=TEXT_COLUMNS)
        kept["settings"] = kept.get("settings", "default")
        fresh = frame.set_index(KEY).index
        frame = pd.concat([kept[~kept.set_index(KEY).index.isin(fresh)], frame],
                          ignore_index=True)
    out.mkdir(parents=True, exist_ok=True)
    frame = frame[KEY + [c for c in frame.columns if c not in KEY]]
    frame.sort_values(KEY).to_csv(path, index=False, float_format="%.4f")
    return frame


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=["mnist5k"], choices=list(CASES))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="params overrides for every run (values parsed as YAML)")
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "evaluation")
    args = parser.parse_args()
    commit = current_commit()  # the code the runs read, whatever changes while they run
    extra = {key: yaml.safe_load(value) for key, value in
             (item.split("=", 1) for item in args.set)}
    bar = RunsBar(len(args.cases) * len(args.seeds), "evaluation")
    for case in args.cases:
        for seed in args.seeds:
            with bar.running(f"{case} seed {seed}"):
                row = {**run_case(case, {**case_overrides(case), **extra}, seed),
                       "settings": " ".join(args.set) or "default"}
            frame = merge(pd.DataFrame([row]), args.out, commit)  # kept if a later one fails
            bar.write(f"{case} seed {seed}: estimated {row['est_accuracy']:.4f} "
                      f"[{row['est_low']:.4f}, {row['est_high']:.4f}], true "
                      f"{row['true_accuracy']:.4f}, prior {row['prior_est']:.3f} "
                      f"(true {row['prior_true']:.3f}), {row['minutes']:.1f} min")
    bar.close()
    summary = frame.groupby(["task", "settings"]).agg(runs=("seed", "count"),
                                        mean_abs_difference=("abs_difference", "mean"),
                                        intervals_holding=("held", "sum"))
    print(summary.to_string())


if __name__ == "__main__":
    main()
