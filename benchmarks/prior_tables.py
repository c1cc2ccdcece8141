"""Every prior estimator on the tabular benchmark's tables (benchmarks/tabular.py): per
table, seed and estimator the estimate, the true prior of U (every training row: the
case-control scenario the benchmark runs) and the error, so the estimator feature rows
should default to is chosen on seeds 0-2 and its error reported on seeds 3-12.

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/prior_tables.py

An estimator is a name of pucl.prior.PRIOR_ESTIMATORS, optionally with its settings as
JSON after a colon (`tedn:{"classifier": "network"}`), as params.yaml's prior.heldout or
prior.km would hold them. Writes reports/tabular/prior_estimators.csv (one row per fit)
and prior_estimators_summary.csv (one row per estimator and role: mean error, mean
absolute error, worst, seconds per fit), and prints the summary; a rerun resumes from the
CSV. KM1 and KM2 (20 s a fit on the digits table, a minute on 3,000 rows) are left out
of the default list; name them to add their rows.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from pucl.io import atomic_path
from pucl.prior import PRIOR_ESTIMATORS

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a file
from _commit import current_commit  # noqa: E402
from tabular import TABLES, Rows, pu_rows  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "reports" / "tabular" / "prior_estimators.csv"
ESTIMATORS = ("tedn", 'tedn:{"folds": 5}', 'tedn:{"classifier": "network"}', "bbe",
              "dedpul", 'dedpul:{"classifier": "network"}', "tice")
CHOOSE, REPORT = (0, 1, 2), tuple(range(3, 13))


def parse(spec: str):
    """(the registry entry, its validated settings) of `name` or `name:{json}`: a misspelt
    estimator or setting fails here, before any fit."""
    name, _, raw = spec.partition(":")
    entry = PRIOR_ESTIMATORS.get(name)
    return entry, entry.settings(json.loads(raw) if raw else None, f"estimator {spec!r}")


def estimate(entry, settings, table: str, seed: int) -> dict:
    """One estimator's fit on one table and seed."""
    x, s, y, *_ = pu_rows(table, seed)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the estimators' convergence chatter
        fitted = entry.build(settings, random_state=seed)
        fitted.fit(x, x[s == 1])  # case-control: U is every training row
    return {"prior": float(fitted.prior_), "true_prior": float(y.mean()),
            "error": float(fitted.prior_ - y.mean()), "seconds": time.perf_counter() - start}


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.assign(abs_error=frame["error"].abs())
    return (frame.groupby(["estimator", "role"], sort=False)
            .agg(mean_error=("error", "mean"), mean_abs_error=("abs_error", "mean"),
                 worst=("abs_error", "max"), n=("error", "size"),
                 seconds=("seconds", "mean"), commit=("commit", "last"))
            .reset_index())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--estimators", nargs="+", default=list(ESTIMATORS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[*CHOOSE, *REPORT])
    parser.add_argument("--tables", nargs="+", default=list(TABLES), choices=list(TABLES))
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    parsed = {spec: parse(spec) for spec in args.estimators}
    rows, commit = Rows(args.out), current_commit()
    todo = [(t, seed, spec) for t in args.tables for seed in args.seeds
            for spec in args.estimators
            if rows.done({"table": t, "seed": seed, "estimator": spec}) is None]
    for table, seed, spec in tqdm(todo, desc="prior fits"):
        role = "choose" if seed in CHOOSE else "report"
        rows.add({"table": table, "seed": seed, "role": role, "estimator": spec,
                  **estimate(*parsed[spec], table, seed), "commit": commit})
    table = summary(rows.frame)
    with atomic_path(args.out.with_name(args.out.stem + "_summary.csv")) as tmp:
        table.to_csv(tmp, index=False, float_format="%.4f")
    print(table.drop(columns="commit").to_string(index=False, float_format="%.3f"))


if __name__ == "__main__":
    main()
