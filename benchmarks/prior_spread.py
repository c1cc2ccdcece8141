"""The class prior's measured spread against its real error, on the tabular benchmark's
tables (benchmarks/tabular.py): per table and seed, TED^n's estimate (the default
estimator, logistic P-vs-U scorer on feature rows), the true prior, the error, and the
bootstrap's prior_std and 95% half-width (docs/prior.md). Writes
reports/tabular/prior_spread.csv (about 30 s on 2 cores).

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/prior_spread.py
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from pucl.io import atomic_path
from pucl.prior import PRIOR_ESTIMATORS
from pucl.recipe.prior import half_width

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a file
from _commit import current_commit  # noqa: E402
from tabular import TABLES, pu_rows  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[3, 4, 5])
    parser.add_argument("--out", type=Path,
                        default=ROOT / "reports" / "tabular" / "prior_spread.csv")
    args = parser.parse_args(argv)
    commit, rows = current_commit(), []
    for table in TABLES:
        for seed in args.seeds:
            x, s, y, *_ = pu_rows(table, seed)
            estimator = PRIOR_ESTIMATORS.get("tedn").build(None, random_state=seed)
            estimator.fit(x, x[s == 1])  # case-control: U is every training row
            std = estimator.details_["prior_std"]
            rows.append({"table": table, "seed": seed, "n_labelled": int(s.sum()),
                         "n_u": len(x), "prior": estimator.prior_, "true_prior": y.mean(),
                         "error": estimator.prior_ - y.mean(), "prior_std": std,
                         "halfwidth": half_width({"prior_std": std}), "commit": commit})
    frame = pd.DataFrame(rows)
    frame["beyond_halfwidth"] = frame["error"].abs() > frame["halfwidth"]
    with atomic_path(args.out) as tmp:
        frame.to_csv(tmp, index=False, float_format="%.4f")
    print(frame.drop(columns="commit").to_string(index=False, float_format="%.3f"))


if __name__ == "__main__":
    main()
