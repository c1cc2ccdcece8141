"""Cross-fitting against a validation part on feature tables: how far each scheme's
label-free estimate lands from the shipped model's test accuracy, and what each costs
the model in accuracy and the fit in seconds.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/crossfit_tables.py [--seeds 0 1 2]
        [--folds 5] [--fraction auto] [--out reports/evaluation/crossfit_tables.csv]

For every table of the tabular benchmark (benchmarks/tabular.py, its 70/30 split and
labelled draw) and seed, `PUClassifier()` with its defaults twice:
- `part`: validation_fraction (`auto`, the pipeline's default: 0.1, or the smallest
  share that holds 20 labelled positives) sets rows aside; the model trains without
  them and the estimate reads them;
- `folds`: validation_folds = K; the model trains on every row and the estimate reads
  every row, each scored by the heads fitted without its fold.
The truth is the shipped model's accuracy on the table's test part, which no fit saw
(its own noise, about sqrt(acc (1 - acc) / n_test), adds to both schemes' misses alike).
One CSV row per fit, written as it ends; a rerun skips the rows already there.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
from tqdm import tqdm  # noqa: E402

from pucl import PUClassifier  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a file
from _commit import current_commit  # noqa: E402
from tabular import TABLES, Rows, pu_rows  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def fit(table: str, seed: int, scheme: str, folds: int, fraction: float | str) -> dict:
    x, s, y, x_test, y_test = pu_rows(table, seed)
    how = ({"validation_folds": folds} if scheme == "folds"
           else {"validation_fraction": fraction})
    start = time.perf_counter()
    clf = PUClassifier(random_state=seed, progress=False, **how).fit(x, s)
    seconds = time.perf_counter() - start
    got, truth = clf.estimates_, float((clf.predict(x_test) == y_test).mean())
    return {"test_accuracy": truth, "est_accuracy": got["val_est_accuracy"],
            "est_low": got["val_est_accuracy_low"], "est_high": got["val_est_accuracy_high"],
            "miss": got["val_est_accuracy"] - truth,
            "held": got["val_est_accuracy_low"] <= truth <= got["val_est_accuracy_high"],
            "n_p_read": got["val_n_p"], "n_labelled": int(s.sum()), "n_test": len(y_test),
            "prior": float(clf.prior_), "true_prior": float(y.mean()), "seconds": seconds}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--fraction", type=lambda v: v if v == "auto" else float(v),
                        default="auto")
    parser.add_argument("--out", type=Path,
                        default=ROOT / "reports" / "evaluation" / "crossfit_tables.csv")
    args = parser.parse_args(argv)
    rows, commit = Rows(args.out), current_commit()
    schemes = {"part": f"validation_fraction={args.fraction}",
               "folds": f"validation_folds={args.folds}"}
    bar = tqdm(total=len(TABLES) * len(args.seeds) * len(schemes), unit="fit")
    for table in TABLES:
        for seed in args.seeds:
            for scheme, settings in schemes.items():
                key = {"table": table, "seed": seed, "scheme": scheme, "settings": settings}
                if rows.done(key) is None:
                    bar.set_postfix_str(f"{table} seed {seed}: {scheme}")
                    rows.add({**key, **fit(table, seed, scheme, args.folds, args.fraction),
                              "commit": commit})
                bar.update()
    bar.close()
    frame = rows.frame.assign(abs_miss=lambda f: f["miss"].abs())
    print(frame.groupby("scheme").agg(
        fits=("miss", "size"), mean_abs_miss=("abs_miss", "mean"), mean_miss=("miss", "mean"),
        held=("held", "mean"), test_accuracy=("test_accuracy", "mean"),
        seconds=("seconds", "mean")).to_string(float_format="%.4f"))
    pivot = frame.pivot_table(index="table", columns="scheme",
                              values=["abs_miss", "test_accuracy"], aggfunc=np.mean)
    print(pivot.to_string(float_format="%.4f"))


if __name__ == "__main__":
    main()
