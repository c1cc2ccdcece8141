"""prefect.yaml's deployments run by a real `prefect worker` on a process work pool, as
docs/gpu.md tells a user to: a Prefect server started with `prefect server start`, the
pool created, `prefect deploy --all` from the project, a deployment run with CPU
overrides, and a worker that picks it up in the project's checkout. What the worker did
is read back from the Prefect API (over HTTP) and the project's own MLflow store."""

from __future__ import annotations

import contextlib
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

pytestmark = pytest.mark.filterwarnings("ignore")

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
        shell("prefect automation create --from-file prefect-automations.yaml", root, env)
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
                    "prefect automation create --from-file prefect-automations.yaml",
                    "prefect worker start --pool gpu",
                    "prefect deployment run pucl-pipeline/pipeline-gpu",
                    "prefect deployment run pucl-retrain/retrain-gpu",
                    '-p \'overrides={"base.device": "cpu"}\''):
        assert command in block, command


@pytest.mark.slow  # a Prefect server, a worker and whole runs
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


@pytest.mark.slow  # a Prefect server, a worker and whole runs
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


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory):
    """`mlflow server` over HTTP: a SQL store and an artifact root of its own, as the
    machines of a team would share it."""
    base = tmp_path_factory.mktemp("mlflow-server")
    port = free_port()
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "mlflow"), "server", "--host", "127.0.0.1",
         "--port", str(port), "--workers", "1",
         "--backend-store-uri", f"sqlite:///{base / 'store.db'}",
         "--artifacts-destination", str(base / "artifacts")],
        cwd=base, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while not healthy(uri):
            assert server.poll() is None and time.monotonic() < deadline, "no mlflow server"
            time.sleep(1)
        yield uri
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)


@pytest.mark.slow  # a Prefect server, a worker and whole runs
def test_two_checkouts_share_one_champion_through_an_mlflow_server(pool, mlflow_server,
                                                                  tmp_path):
    """Two machines, simulated: two checkouts of one commit, each with its own worker on
    the pool, sharing only the Prefect server, an MLflow server and a DVC remote. The
    second worker's retrain sees the first one's champion."""
    _, env = pool
    env = {**env, "MLFLOW_TRACKING_URI": mlflow_server, "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    first = make_project(tmp_path / "first", tiny_params())
    env_first = {**env, "PUCL_PROJECT_DIR": str(first)}
    shell(f"dvc remote modify local url {tmp_path / 'remote'}", first, env_first)
    shell("pucl data init --rows 2000", first, env_first)
    shell("pucl data use", first, env_first)
    shell("dvc push data/dataset/batches.dvc data/dataset/holdout.npz.dvc", first, env_first)
    shell("git add -A", first, env_first)
    shell("git commit -qm data", first, env_first)
    second = tmp_path / "second"
    shell(f"git clone -q {first} {second}", tmp_path, env)
    env_second = {**env, "PUCL_PROJECT_DIR": str(second)}
    # the tracked data version, from the remote only (the stages' outputs are the
    # worker's own business)
    shell("dvc pull data/dataset/batches.dvc data/dataset/holdout.npz.dvc", second,
          env_second)
    assert ((second / "data/dataset/holdout.npz").read_bytes()
            == (first / "data/dataset/holdout.npz").read_bytes())

    run, log = run_on_the_worker("pucl-retrain/retrain-gpu", first, env_first)
    assert run["state_type"] == "COMPLETED", log[-3000:]
    run, log = run_on_the_worker("pucl-retrain/retrain-gpu", second, env_second)
    assert run["state_type"] == "COMPLETED", log[-3000:]

    client = MlflowClient(mlflow_server)
    exp = client.get_experiment_by_name("pucl")
    retrains = client.search_runs([exp.experiment_id], "tags.kind = 'retrain'",
                                  order_by=["attributes.start_time ASC"])
    assert [r.data.tags["retrain.decision"] for r in retrains] == ["promoted", "skipped"]
    assert "unchanged since champion v1" in retrains[1].data.tags["retrain.reason"]
    assert all(r.info.status == "FINISHED" for r in client.search_runs([exp.experiment_id]))
    champion = client.get_model_version_by_alias("pucl-classifier", "champion")
    assert (champion.version, champion.tags["retrain_run_id"]) == ("1", retrains[0].info.run_id)
    # each worker wrote its run folders into its own checkout, nothing into the other's
    assert not (second / "data/runs").exists() or not any(
        (second / "data/runs").rglob("metrics.json"))


def test_the_crash_automation_outwaits_the_deployments_heartbeats():
    """prefect-automations.yaml marks a run CRASHED after `within` seconds without a
    heartbeat: at least three of the beats prefect.yaml's deployments send, or a slow
    beat would crash a live run."""
    from prefect.events.schemas.automations import AutomationCore

    (spec,) = yaml.safe_load((ROOT / "prefect-automations.yaml").read_text())["automations"]
    automation = AutomationCore.model_validate(spec)
    assert automation.actions[0].state.value == "CRASHED"
    deployments = yaml.safe_load((ROOT / "prefect.yaml").read_text())["deployments"]
    beats = {int(d["work_pool"]["job_variables"]["env"]["PREFECT_FLOWS_HEARTBEAT_FREQUENCY"])
             for d in deployments}
    assert automation.trigger.within.total_seconds() >= 3 * max(beats)


def kill_tree(pid: int) -> None:
    """SIGKILL a process and every process under it, as a machine that loses power."""
    import psutil

    root = psutil.Process(pid)
    for process in [*root.children(recursive=True), root]:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()


def wait_for(check, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while not (found := check()):
        assert time.monotonic() < deadline, f"waited {seconds} s for {what}"
        time.sleep(1)
    return found


def stop_worker(worker: subprocess.Popen, how: str) -> None:
    if how == "sigterm":  # `kill PID`, a service manager's stop
        worker.send_signal(signal.SIGTERM)
    else:  # the machine gone: the worker and its flow's process with it
        kill_tree(worker.pid)
    worker.wait(timeout=60)


@pytest.mark.slow  # a Prefect server, a worker killed mid-run, 90 s of silence, a rerun
@pytest.mark.parametrize("how", ["sigkill", "sigterm"])
def test_a_killed_worker_leaves_a_crashed_run_and_the_next_run_completes_elsewhere(pool, how):
    """A worker killed mid-run: the Prefect server marks its flow run CRASHED once the
    heartbeats stop (prefect-automations.yaml), and the next run, on another worker,
    completes and closes the MLflow runs the dead one left RUNNING (KILLED, with the
    reason). SIGTERM is no kinder than SIGKILL here: Prefect's process worker stops at
    once and its flow's process ends with it, unwound or not (measured with Prefect
    3.8.8: the flow run and its MLflow runs stayed RUNNING)."""
    root, env = pool
    api = env["PREFECT_API_URL"]
    client = MlflowClient(f"sqlite:///{root / 'mlflow.db'}")
    made = shell(f"prefect deployment run pucl-pipeline/pipeline-gpu -p '{CPU}'", root, env)
    killed = re.search(r"UUID: ([0-9a-f-]{36})", made).group(1)
    worker = subprocess.Popen(["prefect", "worker", "start", "--pool", "gpu", "--name",
                               "doomed"], cwd=root, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)

    def stage_running():
        exp = client.get_experiment_by_name("pucl")
        return exp and client.search_runs(
            [exp.experiment_id], "attributes.status = 'RUNNING' and tags.stage = 'pretrain'")

    try:
        wait_for(stage_running, 300, "the killed run's pretrain stage to start")
    finally:
        stop_worker(worker, how)
    exp = client.get_experiment_by_name("pucl")
    (parent,) = client.search_runs([exp.experiment_id],
                                   f"tags.prefect_flow_run_id = '{killed}'")
    assert parent.info.status == "RUNNING"  # nothing could close it

    def state_of(run_id: str) -> str:
        return httpx.get(f"{api}/flow_runs/{run_id}").json()["state_type"]

    wait_for(lambda: state_of(killed) == "CRASHED", 240, "the server to mark it CRASHED")
    run, log = run_on_the_worker("pucl-pipeline/pipeline-gpu", root, env)
    assert run["state_type"] == "COMPLETED", log[-3000:]
    left = client.get_run(parent.info.run_id)
    assert left.info.status == "KILLED"
    assert left.data.tags["orphan.reason"] == f"its Prefect flow run {killed} ended CRASHED"
    assert not client.search_runs([exp.experiment_id], "attributes.status = 'RUNNING'")
    children = client.search_runs([exp.experiment_id],
                                  f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    assert children and all(c.info.status in ("KILLED", "FINISHED") for c in children)
