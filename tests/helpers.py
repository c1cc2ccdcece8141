"""Helpers for tests that run stages and DVC in a throw-away project copy."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from pucl.stages import STAGES as PIPELINE_STAGES

STAGES = tuple(PIPELINE_STAGES)  # the one list lives in pucl.stages


def run(cmd: list[str], cwd: Path, check: bool = True, env: dict | None = None):
    result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True,
                            env={**os.environ, **(env or {})})
    if check and result.returncode != 0:
        raise AssertionError(f"{cmd} failed ({result.returncode}):\n{result.stdout}\n"
                             f"{result.stderr}")
    return result


def dvc(project: Path, *args: str, check: bool = True):
    return run([sys.executable, "-m", "dvc", *args], project, check)


def stage(project: Path, name: str, check: bool = True, env: dict | None = None,
          subprocess_: bool = False) -> subprocess.CompletedProcess:
    """`python -m pucl.stages NAME` in `project`. By default the entry point runs in this
    process, with the same working directory, environment, stdout/stderr and exit code:
    the same code path, without paying torch's, MLflow's and great-expectations' imports
    (5-7 s) once per stage. `subprocess_=True` starts a real process."""
    command = [sys.executable, "-m", "pucl.stages", name]
    if subprocess_:
        return run(command, project, check, env)
    from pucl.stages.__main__ import main

    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    out, err, code = io.StringIO(), io.StringIO(), 0
    try:
        os.environ.update(env or {})
        os.chdir(project)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main([name])
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    result = subprocess.CompletedProcess(command, code, out.getvalue(), err.getvalue())
    if check and code != 0:
        raise AssertionError(f"{command} failed ({code}):\n{result.stdout}\n{result.stderr}")
    return result


def pucl_cli(cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`pucl ARGS` in `cwd`, in this process (typer's runner), `env` added to the
    environment: its exit code, stdout and stderr as a process would give them, without a
    process's 3-7 s of imports."""
    from typer.testing import CliRunner

    from pucl.cli import app

    saved = os.getcwd()
    try:
        os.chdir(cwd)
        result = CliRunner().invoke(app, list(args), env=env)
    finally:
        os.chdir(saved)
    return subprocess.CompletedProcess(["pucl", *args], result.exit_code, result.stdout,
                                       result.stderr)


def declared_outputs(project: Path) -> dict[str, set[str]]:
    """Per stage, the files dvc.yaml declares as outs, metrics and plots (interpolated)."""
    params = yaml.safe_load((project / "params.yaml").read_text())
    spec = yaml.safe_load((project / "dvc.yaml").read_text())["stages"]

    def interpolate(path: str) -> str:
        for key, value in params["paths"].items():
            if isinstance(value, str):
                path = path.replace(f"${{paths.{key}}}", value)
        return path

    out = {}
    for name, body in spec.items():
        files = set()
        for kind in ("outs", "metrics", "plots"):
            for entry in body.get(kind, []):
                files.add(interpolate(entry if isinstance(entry, str) else next(iter(entry))))
        out[name] = files
    return out


def data_files(project: Path) -> set[str]:
    return {str(p.relative_to(project)) for p in (project / "data").rglob("*")
            if p.is_file() and p.name != ".gitignore"}


def read_metrics(project: Path) -> dict:
    return json.loads((project / "data/evaluate/metrics.json").read_text())


# -- reading MLflow back with a plain client (not through pucl.tracking) -------------------

def runs(client, query: str) -> list:
    """Runs of the experiment 'pucl' matching an MLflow search query, oldest first."""
    exp = client.get_experiment_by_name("pucl")
    return client.search_runs([exp.experiment_id], query, max_results=1000,
                              order_by=["attributes.start_time ASC"])


def children(client, run_id: str) -> list:
    return runs(client, f"tags.mlflow.parentRunId = '{run_id}'")


def artifact_paths(client, run_id: str, path: str | None = None) -> set[str]:
    out = set()
    for item in client.list_artifacts(run_id, path):
        out |= artifact_paths(client, run_id, item.path) if item.is_dir else {item.path}
    return out


def first_member(root: Path):
    """(the model whose encoder feeds the classifier, its head) of the first encoder, as
    the stages under `root` (a project or run directory, default paths) wrote them."""
    from pucl.artifacts.models import load_classifier, load_models

    return load_classifier(root / "data/classifier/head.pt",
                           load_models(root / "data/pretrain/model.pt"))[0]
