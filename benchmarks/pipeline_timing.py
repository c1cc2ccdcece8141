"""End to end: wall time of `dvc repro` on the default params, per stage, from nothing.

The project's tracked files are copied into a fresh git + DVC repository (no cache, no
outputs, its own MLflow store), then each stage runs as `dvc repro --single-item STAGE`
in pipeline order. Per stage it prints the wall time of that command and the time the
stage itself reports in MLflow (its run's start to end), so the difference is process
start-up, imports and DVC's own bookkeeping.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/pipeline_timing.py [--set pretrain.epochs=10]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from pucl.stages import STAGES

ROOT = Path(__file__).resolve().parents[1]


def fresh_copy(dest: Path, overrides: list[str]) -> dict[str, str]:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        src = ROOT / name
        # data/ holds only READMEs in git (the tracked dataset's folder is a DVC dep of
        # build_split, so it must exist); the stages' outputs are not in git
        if src.is_file() and not name.startswith(("reports/", "mlruns/")):
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    if overrides:
        from pucl.params.config import parse_assignments
        from pucl.recipe.settings import apply_overrides

        raw = yaml.safe_load((dest / "params.yaml").read_text())
        raw = apply_overrides(raw, parse_assignments(overrides))
        (dest / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "MLFLOW_TRACKING_URI": f"sqlite:///{dest / 'mlflow.db'}",
           "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@pucl.invalid",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@pucl.invalid"}
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "copy"]):
        subprocess.run(cmd, cwd=dest, check=True, env=env)
    return env


def stage_seconds(tracking_uri: str) -> dict[str, float]:
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri)
    out = {}
    for exp in client.search_experiments():
        for run in client.search_runs([exp.experiment_id], "tags.kind = 'stage'"):
            if run.info.end_time:
                out[run.data.tags["stage"]] = (run.info.end_time - run.info.start_time) / 1e3
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        help="params override KEY=VALUE (repeatable)")
    parser.add_argument("--keep", action="store_true", help="keep the project copy")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="pucl-e2e-"))
    try:
        env = fresh_copy(workdir, args.overrides)
        wall: dict[str, float] = {}
        for name in STAGES:
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "dvc", "repro", "--single-item", name],
                           cwd=workdir, env=env, check=True, capture_output=True)
            wall[name] = time.perf_counter() - start
            print(f"{name:17s} {wall[name]:7.1f} s", flush=True)
        inner = stage_seconds(env["MLFLOW_TRACKING_URI"])
        print(f"\n{'stage':17s} {'wall s':>8s} {'in stage s':>11s} {'overhead s':>11s}")
        for name in STAGES:
            own = inner.get(name, float("nan"))
            print(f"{name:17s} {wall[name]:8.1f} {own:11.1f} {wall[name] - own:11.1f}")
        total, work = sum(wall.values()), sum(inner.get(n, 0.0) for n in STAGES)
        print(f"{'total':17s} {total:8.1f} {work:11.1f} {total - work:11.1f}")
        print(f"share of wall time spent in the stages' own work: {work / total:.2f}")
    finally:
        if args.keep:
            print(f"project copy kept at {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
