"""Prior estimators side by side on the pipeline's own splits: absolute error and seconds
per estimator, case and seed.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/prior_table.py [--seeds 0 1 2] [--cases ...]

Runs the real build_split and estimate_prior stages (in-process, MLflow off) in a
temporary directory, once per estimator, and writes reports/prior/prior.csv (one row per
estimator and case: mean and std of the absolute error, n seeds, seconds per run) and
reports/prior/prior_runs.csv (one row per run). KM1 comes out of the KM2 run, DEDPUL on
TED^n's CVIR scores (dedpul_cvir) out of the tedn run. Runs
already in --out's prior_runs.csv stay unless this run measures the same estimator, case
and seed, so `--estimators tice` adds a row per case to the table.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import pandas as pd
import yaml
from _commit import (  # run as files: benchmarks/ is on sys.path
    TEXT_COLUMNS,
    current_commit,
    with_commit,
)

ROOT = Path(__file__).resolve().parents[1]
# case: params overrides. F-MNIST reads Fashion-MNIST's IDX files (Debian's
# dataset-fashion-mnist package, or paths.data_root): `--cases` leaves them out.
CASES = {
    "mnist5k-evens": {},  # MNIST-I: even digits, prior 0.5
    "mnist5k-evens-u0.7": {"split.prior": 0.7},  # U subsampled to 70% even digits
    "mnist5k-digits0-6": {"data.task": "mnist-ii"},  # prior about 0.7
    "fmnist-i": {"data.dataset": "fmnist", "data.task": "fmnist-i"},  # prior 0.3
    "fmnist-ii": {"data.dataset": "fmnist", "data.task": "fmnist-ii"},  # prior 0.7
}
# Estimators whose estimate is read from another's run: KM2's run computes KM1's
# threshold too, and TED^n's reports DEDPUL on its own CVIR scores.
READ_FROM = {"km2": {"km1": "km1"}, "tedn": {"dedpul_cvir": "dedpul_cvir"}}


def run_case(case: str, overrides: dict, seed: int, estimator: str) -> list[dict]:
    from pucl.stages.runner import call_stage, resolve_params

    with tempfile.TemporaryDirectory(prefix="prior-table-") as tmp:
        params = resolve_params(ROOT, {**overrides, "base.seed": seed, "prior.method": estimator,
                                       "paths.pretrain_cache": None})
        call_stage("build_split", params, Path(tmp), False, None)
        start = time.perf_counter()
        call_stage("estimate_prior", params, Path(tmp), False, None)
        seconds = time.perf_counter() - start
        report = json.loads((Path(tmp) / params.paths.prior / "prior.json").read_text())
    truth = report["prior_true"]
    rows = [{"estimator": estimator, "case": case, "seed": seed, "prior_true": truth,
             "estimate": report["prior"], "abs_error": abs(report["prior"] - truth),
             "seconds": seconds,
             # the bootstrap's standard deviation of the estimate (the interval's prior part)
             "prior_std": report.get("prior_std"),
             # BBE's best bin: the share of held-out labelled positives in it, and their number
             "bbe_q_p": report.get("bbe_q_p"), "heldout_n_p": report.get("heldout_n_p"),
             # prior.heldout.restarts > 1: each restart's estimate, the first the run's own
             "restart_estimates": ";".join(f"{r['prior']:.4f}" for r in
                                           report.get("restart_estimates", ())) or None}]
    for name, key in READ_FROM.get(estimator, {}).items():
        rows.append({**rows[0], "estimator": name, "estimate": report[key],
                     "restart_estimates": None, "prior_std": None,
                     "bbe_q_p": None, "heldout_n_p": None,
                     "abs_error": abs(report[key] - truth)})
    return rows


def write_tables(frame: pd.DataFrame, out: Path, commit: str) -> pd.DataFrame:
    """Merge these runs into out/prior_runs.csv (a rerun replaces its own estimator, case
    and seed; other rows stay) and write the per-case table out/prior.csv from it."""
    previous = out / "prior_runs.csv"
    frame = with_commit(frame, commit)
    if previous.exists():
        kept = pd.read_csv(previous, dtype=TEXT_COLUMNS)
        key = ["estimator", "case", "seed"]
        fresh = frame.set_index(key).index
        frame = pd.concat([kept[~kept.set_index(key).index.isin(fresh)], frame],
                          ignore_index=True)
    table = (frame.groupby(["estimator", "case"], sort=True)
             .agg(prior_true=("prior_true", "mean"), abs_error=("abs_error", "mean"),
                  abs_error_std=("abs_error", lambda s: s.std(ddof=0)), n=("seed", "count"),
                  prior_std=("prior_std", "mean"),
                  seconds_per_run=("seconds", "mean"),
                  # the commits its runs were measured at (one, when it reruns as a row)
                  commit=("commit", lambda c: " ".join(sorted(set(c.dropna())))))
             .reset_index())
    out.mkdir(parents=True, exist_ok=True)
    frame.to_csv(out / "prior_runs.csv", index=False, float_format="%.4f")
    table.to_csv(out / "prior.csv", index=False, float_format="%.4f")
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--estimators", nargs="+", default=["km2", "tedn"])
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="params overrides for every run (values parsed as YAML)")
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "prior")
    args = parser.parse_args()
    os.environ["PUCL_TRACKING"] = "off"  # estimates only: no MLflow runs
    commit = current_commit()  # the code the runs read, whatever changes while they run
    extra = {key: yaml.safe_load(value) for key, value in
             (item.split("=", 1) for item in args.set)}
    runs, table = [], None
    for case in args.cases:
        overrides = {**CASES[case], **extra}
        for seed in args.seeds:
            for estimator in args.estimators:
                rows = run_case(case, overrides, seed, estimator)
                runs.extend(rows)
                last = rows[0]  # the estimator run (rows read from it follow)
                print(f"{case} seed {seed} {estimator}: {last['estimate']:.3f} "
                      f"(true {last['prior_true']:.3f}) in {last['seconds']:.1f} s", flush=True)
                table = write_tables(pd.DataFrame(runs), args.out, commit)  # kept if stopped later
    if table is not None:
        print(table.to_string(index=False))


if __name__ == "__main__":
    main()
