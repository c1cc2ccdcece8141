"""How PUClassifier's cost grows with the rows of a feature table: seconds and peak
memory of each step of `fit` (prior, pretrain, pupl, classifier) and of `predict`, at
10,000 to 1,000,000 rows of 32 features, with the slope of each step on log-log axes.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/tabular_scale.py [--rows 10000 100000 1000000]
        [--set NAME=VALUE ...] [--out reports/tabular/scale.csv]

Each size runs in a process of its own, so that its peak resident memory is its own.
The table is scikit-learn's make_classification (32 features: 8 informative, 8
redundant; prior 0.4; a tenth of the positives labelled; U is every row), with 20,000
more rows of the same draw as the test set. The estimator runs with its defaults and
any --set NAME=VALUE of its parameters (JSON values). A slope near 1 is linear in the
rows; the figure `<out>.png` draws every step.

With --pipeline the same tables go through the pipeline's six stages instead (the path of
`pucl run` on an npz, in process, tracking into a temporary MLflow store): seconds of each
stage, and the highest resident memory while it ran.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a file
from _commit import current_commit  # noqa: E402

TEST_ROWS = 20_000


def table(rows: int, seed: int = 0):
    from sklearn.datasets import make_classification

    x, y = make_classification(n_samples=rows + TEST_ROWS, n_features=32, n_informative=8,
                               n_redundant=8, weights=[0.6], flip_y=0.0, random_state=seed)
    x = x.astype(np.float32)
    rng = np.random.default_rng(seed)
    s = ((y[:rows] == 1) & (rng.random(rows) < 0.1)).astype(int)
    return x[:rows], s, x[rows:], y[rows:]


def measure(rows: int, params: dict) -> list[dict]:
    """One size in this process: a row per step."""
    import torch

    from pucl import PUClassifier
    from pucl.runtime.clock import StepClock

    torch.set_num_threads(2)
    x, s, x_test, y_test = table(rows)
    clock = StepClock(memory=True)
    clf = PUClassifier(**params)
    fit_clock = StepClock(memory=True)
    with fit_clock("fit"):
        clf.fit(x, s)
    with clock("predict"):
        predicted = clf.predict(x_test)
    accuracy = float((predicted == y_test).mean())
    seconds = {**clf.timings_, "fit": fit_clock.seconds["fit"],
               "predict": clock.seconds["predict"]}
    peak = {"fit": fit_clock.peak_rss["fit"], "predict": clock.peak_rss["predict"]}
    return [{"rows": rows, "step": step, "seconds": round(value, 3),
             "peak_rss_mb": round(peak[step] / 2**20) if step in peak else np.nan,
             "accuracy": accuracy, "prior": float(clf.prior_)}
            for step, value in seconds.items()]


def measure_pipeline(rows: int, overrides: dict) -> list[dict]:
    """One size through the six stages, as `pucl run` with `data.dataset: npz` runs them: a
    row per stage and one for the whole run ("run")."""
    import os
    import tempfile

    from pucl.runtime.clock import StepClock
    from pucl.stages.runner import call_stage, resolve_params, run_pipeline

    x, s, x_test, y_test = table(rows)
    clock = StepClock(memory=True)

    def timed(stage: str, *args) -> dict:
        with clock(stage):
            return call_stage(stage, *args)

    with tempfile.TemporaryDirectory(prefix="tabular-scale-") as tmp:
        data, work = Path(tmp) / "table.npz", Path(tmp) / "run"
        np.savez(data, x=x, pu=s, x_test=x_test, y_test=y_test)
        os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{tmp}/mlflow.db"  # not the project's
        params = resolve_params(ROOT, {"data.dataset": "npz", "data.task": "given",
                                       "data.path": str(data), **overrides})
        with clock("run"):
            run_pipeline(params, work, f"scale-{rows}", stage_call=timed)
        metrics = json.loads((work / params.paths.evaluate / "metrics.json").read_text())
    return [{"rows": rows, "step": step, "seconds": round(value, 3),
             "peak_rss_mb": round(clock.peak_rss[step] / 2**20),
             "accuracy": metrics["accuracy"], "prior": metrics["prior_estimate"]}
            for step, value in clock.seconds.items()]


def slopes(frame: pd.DataFrame) -> pd.DataFrame:
    """Each step's log-log slope of seconds against rows, between consecutive sizes."""
    out = []
    for step, part in frame.groupby("step", sort=False):
        part = part.sort_values("rows")
        logs = np.log(part[["rows", "seconds"]].to_numpy(dtype=float))
        for (r0, s0), (r1, s1), rows in zip(logs[:-1], logs[1:], part.rows.iloc[1:],
                                            strict=True):
            out.append({"step": step, "to_rows": rows, "slope": round((s1 - s0) / (r1 - r0), 2)})
    return pd.DataFrame(out)


def figure(frame: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for step, part in frame.groupby("step", sort=False):
        left.plot(part.rows, part.seconds, marker="o", label=step)
    whole = "fit" if (frame.step == "fit").any() else "run"  # the estimator's or the pipeline's
    left.set(xscale="log", yscale="log", xlabel="rows", ylabel="seconds",
             title=f"{'PUClassifier' if whole == 'fit' else 'pipeline'}: seconds per step")
    left.legend()
    part = frame[frame.step == whole]
    right.plot(part.rows, part.peak_rss_mb, marker="o", label=whole)
    right.set(xscale="log", xlabel="rows", ylabel="peak resident MB",
              title=f"peak memory of the {whole}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--set", nargs="*", default=[], metavar="NAME=VALUE")
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "tabular" / "scale.csv")
    parser.add_argument("--pipeline", action="store_true",
                        help="the pipeline's stages (--set takes params keys, YAML values)")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a child's size
    args = parser.parse_args(argv)
    parse = yaml.safe_load if args.pipeline else json.loads
    params = {name: parse(value) for name, value in (item.split("=", 1) for item in args.set)}
    if args.one:
        run = measure_pipeline if args.pipeline else measure
        print(json.dumps(run(args.one, params)))
        return
    commit, found = current_commit(), []
    for rows in args.rows:
        start = time.perf_counter()
        # the child's progress bars go to this terminal; its rows come back on stdout
        child = subprocess.run([sys.executable, __file__, "--one", str(rows),
                                *(["--pipeline"] if args.pipeline else []),
                                "--set", *args.set], stdout=subprocess.PIPE, text=True)
        if child.returncode:
            sys.exit(f"{rows} rows failed (exit {child.returncode}); its error is above")
        found += json.loads(child.stdout.strip().splitlines()[-1])
        print(f"{rows} rows: {time.perf_counter() - start:.0f} s", flush=True)
    frame = pd.DataFrame(found).assign(settings=json.dumps(params, sort_keys=True),
                                       commit=commit)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(args.out, index=False)
    slopes(frame).to_csv(args.out.with_name(args.out.stem + "_slopes.csv"), index=False)
    figure(frame, args.out.with_suffix(".png"))
    print(frame.to_string(index=False))
    print(slopes(frame).to_string(index=False))


if __name__ == "__main__":
    main()
