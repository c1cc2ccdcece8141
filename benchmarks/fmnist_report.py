"""Merge a `pucl bench` comparison into a reports/fmnist CSV, in the reports' column order.

    python benchmarks/fmnist_report.py COMPARISON_CSV reports/fmnist/fmnist-ii-1k.csv

Rows are keyed by (variant, prior_source): a new measurement replaces the row of the same
variant and prior source and keeps the others. Rows measured before the comparison
recorded `prior_source` and `minutes_per_seed` get the source their params imply
(`--legacy-source VARIANT=SOURCE`) and an empty minutes cell (not recorded then).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd
from _commit import TEXT_COLUMNS, with_commit  # run as files: benchmarks/ is on sys.path

FIRST = ["variant", "prior_source", "accuracy", "accuracy_std", "n", "minutes_per_seed"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("comparison", type=Path)
    parser.add_argument("report", type=Path)
    parser.add_argument("--legacy-source", nargs="*", default=[], metavar="VARIANT=SOURCE")
    args = parser.parse_args()
    new = pd.read_csv(args.comparison)
    old = (pd.read_csv(args.report, dtype=TEXT_COLUMNS) if args.report.exists()
           else pd.DataFrame(columns=FIRST))
    legacy = dict(item.split("=", 1) for item in args.legacy_source)
    if "prior_source" not in old:
        old["prior_source"] = old["variant"].map(legacy)
        missing = sorted(set(old.loc[old["prior_source"].isna(), "variant"]))
        if missing:
            raise SystemExit(f"error: no --legacy-source for the old rows {missing}")
    if "minutes_per_seed" not in old:
        old["minutes_per_seed"] = float("nan")
    keys = set(zip(new["variant"], new["prior_source"], strict=True))
    kept = old[[(v, s) not in keys for v, s in zip(old["variant"], old["prior_source"],
                                                   strict=True)]]
    merged = pd.concat([kept, new], ignore_index=True).sort_values(["variant", "prior_source"])
    merged = with_commit(merged[[*FIRST, *[c for c in merged.columns if c not in FIRST]]])
    merged.to_csv(args.report, index=False)
    print(merged[FIRST].to_string(index=False))


if __name__ == "__main__":
    main()
