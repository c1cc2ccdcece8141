"""prefect.yaml's deployments run by a real `prefect worker` on a process work pool, as
docs/gpu.md tells a user to: a Prefect server started with `prefect server start`, the
pool created, `prefect deploy --all` from the project, a deployment run with CPU
overrides, and a worker that picks it up in the project's checkout. What the worker did
is read back from the Prefect API (over HTTP) and the project's own MLflow store."""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml
from mlflow.tracking import MlflowClient

from tests.conftest import ROOT, make_project, tiny_params
from tests.helpers import STAGES

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore")]

CPU = "overrides={\"base.device\": \"cpu\"}"  # the deployments ask for cuda


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    """A Prefect server of its own, a `gpu` process pool on it, prefect.yaml deployed from
    a project copy; yields (project, the environment of a shell following the docs)."""
    base = tmp_path_factory.mktemp("workers")
    root = make_project(base / "proj", tiny_params())
    port = free_port()
    bin_dir = Path(sys.executable).parent
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("PREFECT_", "PUCL_", "MLFLOW_"))}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env['PATH']}", PREFECT_HOME=str(base / "home"),
               PREFECT_API_URL=f"http://127.0.0.1:{port}/api",
               PREFECT_API_DATABASE_CONNECTION_URL=(
                   f"sqlite+aiosqlite:///{base / 'prefect.db'}"),
               PREFECT_SERVER_ANALYTICS_ENABLED="false", PUCL_PROJECT_DIR=str(root))
    server = subprocess.Popen(["prefect", "server", "start", "--host", "127.0.0.1", "--port",
                               str(port)], cwd=base, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not healthy(env["PREFECT_API_URL"]):
            assert server.poll() is None and time.monotonic() < deadline, "no server"
            time.sleep(1)
        shell("prefect work-pool create gpu --type process", root, env)
        shell("prefect --no-prompt deploy --all", root, env)
        yield root, env
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)


def healthy(api: str) -> bool:
    try:
        return httpx.get(f"{api}/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def shell(command: str, cwd: Path, env: dict, timeout: int = 600) -> str:
    result = subprocess.run(shlex.split(command), cwd=cwd, env=env, capture_output=True,
                            text=True, timeout=timeout)
    assert result.returncode == 0, (command, result.stdout[-3000:], result.stderr[-3000:])
    return result.stdout + result.stderr


def run_on_the_worker(deployment: str, root: Path, env: dict) -> tuple[dict, str]:
    """Schedule a run of `deployment` with CPU overrides and let one worker poll once:
    it runs it in the project's checkout and stops. Returns the flow run, as the Prefect
    API has it, and the worker's log."""
    made = shell(f"prefect deployment run {deployment} -p '{CPU}'", root, env)
    run_id = re.search(r"UUID: ([0-9a-f-]{36})", made).group(1)
    log = shell("prefect worker start --pool gpu --run-once", root, env)
    return httpx.get(f"{env['PREFECT_API_URL']}/flow_runs/{run_id}").json(), log


def test_docs_gpu_md_names_the_commands_these_tests_run():
    block = (ROOT / "docs/gpu.md").read_text().split("## A Prefect GPU work pool")[1]
    for command in ("prefect work-pool create gpu --type process", "prefect deploy --all",
                    "prefect worker start --pool gpu",
                    "prefect deployment run pucl-pipeline/pipeline-gpu",
                    "prefect deployment run pucl-retrain/retrain-gpu",
                    '-p \'overrides={"base.device": "cpu"}\''):
        assert command in block, command


def test_a_worker_runs_the_pipeline_deployment_in_the_projects_checkout(pool):
    root, env = pool
    run, log = run_on_the_worker("pucl-pipeline/pipeline-gpu", root, env)
    assert run["state_type"] == "COMPLETED", log[-3000:]
    assert run["parameters"] == {"overrides": {"base.device": "cpu"}}  # replaced, not merged
    workdir = Path(re.search(r"outputs in (\S+?);", log).group(1))
    assert workdir.parent == root / "data/runs"
    assert (workdir / "data/evaluate/metrics.json").exists()
    assert yaml.safe_load((workdir / "params.yaml").read_text())["base"]["device"] == "cpu"
    # the worker's log ends with what the run gave and where it is
    assert re.search(r"run run-\S+: accuracy \d\.\d{4}, ", log)
    client = MlflowClient(f"sqlite:///{root / 'mlflow.db'}")  # the checkout's own store
    exp = client.get_experiment_by_name("pucl")
    parents = client.search_runs([exp.experiment_id], "tags.kind = 'pipeline'")
    assert [p.info.status for p in parents] == ["FINISHED"]
    assert parents[0].data.tags["prefect_flow_run_id"] == run["id"]
    stages = client.search_runs([exp.experiment_id],
                                f"tags.mlflow.parentRunId = '{parents[0].info.run_id}'")
    assert sorted(r.data.tags["stage"] for r in stages) == sorted(STAGES)


def test_a_worker_runs_the_retrain_deployment_and_promotes_a_champion(pool):
    root, env = pool
    shell("pucl data init --rows 2000", root, env)
    shell("pucl data use", root, env)  # params.yaml now trains on the tracked dataset
    run, log = run_on_the_worker("pucl-retrain/retrain-gpu", root, env)
    assert run["state_type"] == "COMPLETED", log[-3000:]
    client = MlflowClient(f"sqlite:///{root / 'mlflow.db'}")
    champion = client.get_model_version_by_alias("pucl-classifier", "champion")
    exp = client.get_experiment_by_name("pucl")
    (retrain,) = client.search_runs([exp.experiment_id], "tags.kind = 'retrain'")
    assert retrain.data.tags["retrain.decision"] == "promoted"
    assert champion.tags["retrain_run_id"] == retrain.info.run_id
