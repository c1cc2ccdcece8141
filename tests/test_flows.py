"""Prefect flows and MLflow tracking, on tiny params, against a temporary Prefect server
(`prefect_test_harness`) and a temporary sqlite MLflow store. What was tracked is read back
with a plain `MlflowClient`, not through pucl's own tracking module."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from mlflow.tracking import MlflowClient

from tests.conftest import make_project, python_path
from tests.helpers import STAGES, dvc, run

pytestmark = pytest.mark.filterwarnings("ignore")


@pytest.fixture(scope="module")
def harness():
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """A project copy and an MLflow store shared by the tests of this module."""
    base = tmp_path_factory.mktemp("flows")
    uri = f"sqlite:///{base / 'mlflow.db'}"
    with pytest.MonkeyPatch.context() as mp:
        root = make_project(base / "proj")
        mp.setenv("PUCL_ROOT", str(root))
        mp.setenv("MLFLOW_TRACKING_URI", uri)
        mp.setenv("PATH", python_path())
        mp.setenv("PUCL_TRACKING", "on")  # restored afterwards whatever a test sets
        mp.chdir(root)
        yield {"root": root, "uri": uri, "client": MlflowClient(uri)}


def runs(client: MlflowClient, query: str) -> list:
    exp = client.get_experiment_by_name("pucl")
    return client.search_runs([exp.experiment_id], query, max_results=1000,
                              order_by=["attributes.start_time ASC"])


def children(client: MlflowClient, run_id: str) -> list:
    return runs(client, f"tags.mlflow.parentRunId = '{run_id}'")


def artifact_paths(client: MlflowClient, run_id: str, path: str | None = None) -> set[str]:
    out = set()
    for item in client.list_artifacts(run_id, path):
        out |= artifact_paths(client, run_id, item.path) if item.is_dir else {item.path}
    return out


@pytest.fixture(scope="module")
def executions(env, harness):
    """The same tiny params run twice: by plain `dvc repro` and by the pipeline flow."""
    from pucl.flows.pipeline import pipeline

    dvc(env["root"], "repro")
    summary = pipeline(run_name="flow-run", project=str(env["root"]), progress=False)
    return {"flow": summary}


def test_pipeline_flow_gives_the_metrics_of_dvc_repro(env, executions):
    dvc_metrics = json.loads((env["root"] / "data/evaluate/metrics.json").read_text())
    workdir = Path(executions["flow"]["workdir"])
    assert workdir == env["root"] / "data/runs/flow-run"
    flow_metrics = json.loads((workdir / "data/evaluate/metrics.json").read_text())
    assert flow_metrics == dvc_metrics
    assert executions["flow"]["metrics"]["accuracy"] == dvc_metrics["accuracy"]
    # the run directory records the exact params; the DVC outputs were not touched
    snapshot = yaml.safe_load((workdir / "params.yaml").read_text())
    assert snapshot["pretrain"]["epochs"] == 2
    assert dvc(env["root"], "status").stdout.strip().endswith("up to date.")


@pytest.mark.parametrize("entry", ["dvc", "prefect"])
def test_one_parent_and_one_run_per_stage_per_execution(env, executions, entry):
    client = env["client"]
    params = yaml.safe_load((env["root"] / "params.yaml").read_text())
    parents = runs(client, f"tags.kind = 'pipeline' and tags.entry = '{entry}'")
    assert len(parents) == 1
    parent = parents[0]
    assert parent.info.status == "FINISHED"
    assert parent.data.params["pretrain.temperature"] == str(params["pretrain"]["temperature"])
    assert parent.data.params["pretrain.augment.degrees"] == str(
        params["pretrain"]["augment"]["degrees"])
    assert 0 < parent.data.metrics["gamma"] < 1 and "accuracy" in parent.data.metrics

    stage_runs = children(client, parent.info.run_id)
    assert [r.info.run_name for r in stage_runs] == list(STAGES)
    for r in stage_runs:
        assert r.info.status == "FINISHED"
        tags = r.data.tags
        assert tags["stage"] == r.info.run_name and tags["kind"] == "stage"
        assert tags["dataset"] == "mnist5k" and tags["task"] == "mnist-i"
        assert len(tags["git_commit"]) == 40
        # the lock as it was when the stage started: none yet in the fresh copy's first repro
        assert len(tags["dvc_lock"]) == 16 or (entry == "dvc" and tags["dvc_lock"] == "none")
    by_name = {r.info.run_name: r for r in stage_runs}
    pretrain = by_name["pretrain"]
    assert pretrain.data.params["pretrain.loss"] == params["pretrain"]["loss"]
    assert "split.n_p" not in pretrain.data.params  # each stage logs its own sections
    history = client.get_metric_history(pretrain.info.run_id, "loss")
    assert [m.step for m in history] == list(range(1, params["pretrain"]["epochs"] + 1))

    expected = {
        "build_split": {"summary.json", "manifest.parquet"},
        "estimate_prior": {"prior.json"},
        "reestimate_prior": {"reestimate.json"},
        "pretrain": {"model.pt", "history.csv", "loss.png"},
        "pupl_label": {"labels.parquet", "summary.json"},
        "train_classifier": {"head.pt"},
        "evaluate": {"metrics.json", "roc.png", "roc.csv", "embedding.png"},
    }
    for stage, files in expected.items():
        assert files <= artifact_paths(client, by_name[stage].info.run_id), stage
    evaluate = by_name["evaluate"]
    assert evaluate.data.metrics["accuracy"] == parent.data.metrics["accuracy"]
    assert evaluate.data.tags["model_id"]


def test_logged_classifier_reproduces_the_stage_outputs(env, executions):
    """The MLflow model (torch.export format) gives the same P(y=1|x) as encoder + head
    loaded from the stage files."""
    import mlflow.pytorch

    from pucl.artifacts import load_head, load_model
    from pucl.classify.deployable import PUClassifier

    client = env["client"]
    parent = runs(client, "tags.kind = 'pipeline' and tags.entry = 'prefect'")[0]
    evaluate = [r for r in children(client, parent.info.run_id)
                if r.info.run_name == "evaluate"][0]
    mlflow.set_tracking_uri(env["uri"])
    served = mlflow.pytorch.load_model(f"models:/{evaluate.data.tags['model_id']}")
    workdir = Path(executions["flow"]["workdir"])
    reference = PUClassifier(load_model(workdir / "data/pretrain/model.pt").encoder,
                             load_head(workdir / "data/classifier/head.pt")).eval()
    x = torch.rand(5, 1, 28, 28, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        np.testing.assert_allclose(served(x).numpy(), reference(x).numpy(), atol=1e-6)


def test_sweep_runs_every_point_and_compares_them(env, executions):
    from prefect.task_runners import ProcessPoolTaskRunner

    from pucl.flows.sweep import sweep

    spec = {"name": "tiny", "seeds": [0, 1], "grid": {"split.n_p": [100, 200]},
            "set": {"pretrain.epochs": 1}}
    result = sweep.with_options(task_runner=ProcessPoolTaskRunner(max_workers=1))(
        spec=spec, project=str(env["root"]))
    client = env["client"]
    sweep_run = client.get_run(result["mlflow_run_id"])
    assert sweep_run.data.tags["kind"] == "sweep" and sweep_run.info.status == "FINISHED"
    points = children(client, result["mlflow_run_id"])
    assert sorted(r.info.run_name for r in points) == sorted(
        ["n_p=100,s0", "n_p=100,s1", "n_p=200,s0", "n_p=200,s1"])
    for r in points:
        assert r.data.tags["kind"] == "pipeline"
        assert len(children(client, r.info.run_id)) == len(STAGES)
        n_p = int(r.data.params["split.n_p"])
        assert r.data.metrics["n_p"] == n_p
        assert (env["root"] / "data/runs/tiny" / r.info.run_name / "data/evaluate"
                / "metrics.json").exists()
    assert {"comparison/comparison.csv", "comparison/accuracy_vs_gamma.png"} <= artifact_paths(
        client, result["mlflow_run_id"])

    # `pucl compare` reads the sweep back from MLflow: one row per point.
    shown = run([sys.executable, "-m", "pucl.cli", "compare", "--sweep", "tiny"], env["root"])
    table = pd.read_csv(env["root"] / "data/runs/tiny/comparison.csv")
    assert len(table) == 4
    assert {"split.n_p", "base.seed", "gamma", "accuracy"} <= set(table.columns)
    for name in table["run"]:
        assert name in shown.stdout
    grouped = run([sys.executable, "-m", "pucl.cli", "compare", "--sweep", "tiny", "--by",
                   "split.n_p", "--out", "grouped"], env["root"])
    by_n_p = pd.read_csv(env["root"] / "grouped/comparison.csv")
    assert list(by_n_p["n"]) == [2, 2] and "accuracy_std" in by_n_p
    for n_p, part in table.groupby("split.n_p"):
        assert by_n_p.set_index("split.n_p").loc[n_p, "accuracy"] == pytest.approx(
            part["accuracy"].mean())
    assert "grouped" in grouped.stdout


def test_bench_runs_variants_and_prints_them_beside_the_reference(env, executions):
    """`pucl bench FILE`: variants x seeds through the sweep flow (its own Prefect server,
    as a user gets it), grouped by variant, the reference beside each."""
    preset = env["root"] / "tiny-preset.yaml"
    preset.write_text(yaml.safe_dump({
        "name": "tiny-bench", "seeds": [0, 1], "set": {"pretrain.epochs": 1},
        "variants": {"pucl_pupl": {"pretrain.loss": "pucl"},
                     "pucl_nnpu": {"pretrain.loss": "pucl", "classifier.objective": "nnpu",
                                   "classifier.prior": "oracle"}},
        "reference": {"pucl_pupl": 91.8}}))
    env_vars = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    result = subprocess.run([sys.executable, "-m", "pucl.cli", "bench", str(preset),
                             "--seeds", "0", "--variants", "pucl_pupl,pucl_nnpu"],
                            cwd=env["root"], capture_output=True, text=True, env=env_vars)
    assert result.returncode == 0, result.stderr[-3000:]
    table = pd.read_csv(env["root"] / "data/runs/tiny-bench/comparison.csv")
    assert sorted(table["variant"]) == ["pucl_nnpu", "pucl_pupl"]
    assert list(table["n"]) == [1, 1]  # --seeds 0 replaced the preset's two seeds
    rows = {line.split("│")[1].strip(): line for line in result.stdout.splitlines()
            if line.count("│") > 3 and "pucl_" in line}
    accuracy = table.set_index("variant")["accuracy"]
    assert f"{100 * accuracy['pucl_pupl']:.1f} +- 0.0" in rows["pucl_pupl"]
    assert "91.8" in rows["pucl_pupl"] and "91.8" not in rows["pucl_nnpu"]
    client = env["client"]
    tagged = runs(client, "tags.sweep = 'tiny-bench' and tags.kind = 'pipeline'")
    assert sorted(r.data.tags["variant"] for r in tagged) == ["pucl_nnpu", "pucl_pupl"]
    nnpu = next(r for r in tagged if r.data.tags["variant"] == "pucl_nnpu")
    assert nnpu.data.params["classifier.objective"] == "nnpu"


def test_sweep_on_an_existing_dask_cluster(env, executions):
    from distributed import LocalCluster
    from prefect_dask import DaskTaskRunner

    from pucl.flows.sweep import sweep

    spec = {"name": "dask", "seeds": [0], "grid": {"pretrain.loss": ["sscl"]},
            "set": {"pretrain.epochs": 1}}
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster:
        result = sweep.with_options(task_runner=DaskTaskRunner(
            address=cluster.scheduler_address))(spec=spec, project=str(env["root"]))
    assert len(result["points"]) == 1
    assert result["points"][0]["metrics"]["accuracy"] > 0.5
    assert len(children(env["client"], result["mlflow_run_id"])) == 1


def test_failed_data_contract_stops_the_flow(env, executions):
    from pucl.flows.pipeline import pipeline
    from pucl.validation import ValidationFailed

    with pytest.raises(ValidationFailed, match="validation suite 'pseudo_labels' failed"):
        pipeline(overrides={"validation.positive_fraction": [0.96, 1.0]}, run_name="refused",
                 project=str(env["root"]), progress=False)
    client = env["client"]
    parent = runs(client, "attributes.run_name = 'refused'")[0]
    assert parent.info.status == "FAILED"
    stages = {r.info.run_name: r for r in children(client, parent.info.run_id)}
    assert list(stages) == ["build_split", "estimate_prior", "pretrain", "reestimate_prior",
                            "pupl_label"]
    assert stages["pupl_label"].info.status == "FAILED"
    assert "validation/pseudo_labels.json" in artifact_paths(
        client, stages["pupl_label"].info.run_id)
    assert not (env["root"] / "data/runs/refused/data/pupl/labels.parquet").exists()


def test_unreachable_tracking_server_still_completes_and_says_so_once(env, executions,
                                                                       monkeypatch, capfd):
    import socket

    from pucl.flows.pipeline import pipeline

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{port}")
    capfd.readouterr()
    summary = pipeline(run_name="offline", project=str(env["root"]), progress=False)
    err = capfd.readouterr().err
    assert summary["mlflow_run_id"] is None
    assert (Path(summary["workdir"]) / "data/evaluate/metrics.json").exists()
    lines = [line for line in err.splitlines() if "MLflow" in line]
    assert len(lines) == 1 and "results are written locally only" in lines[0], err


def test_serve_registers_a_deployment_with_the_cron_schedule(env, harness):
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL

    api = PREFECT_API_URL.value()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pucl.cli", "serve", "--cron", "*/30 3 * * *", "--name",
         "nightly"], cwd=env["root"], env={**os.environ, "PREFECT_API_URL": api},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline, deployment = time.monotonic() + 120, None
        with get_client(sync_client=True) as client:
            while deployment is None and time.monotonic() < deadline:
                assert proc.poll() is None, proc.stdout.read()
                try:
                    deployment = client.read_deployment_by_name("pucl-retrain/nightly")
                except Exception:
                    time.sleep(1)
        assert deployment is not None, "no deployment registered within 120 s"
        assert [s.schedule.cron for s in deployment.schedules] == ["*/30 3 * * *"]
        assert deployment.parameters["project"] == str(env["root"])
        assert deployment.parameters["wait"] == 600  # a scheduled pass waits for a manual one
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_prefect_yaml_deployments_point_at_real_flows(env):
    from prefect.client.schemas.schedules import CronSchedule
    from prefect.flows import load_flow_from_entrypoint

    from pucl.stages.runner import resolve_params

    spec = yaml.safe_load((env["root"] / "prefect.yaml").read_text())
    assert spec["deployments"]
    for deployment in spec["deployments"]:
        flow = load_flow_from_entrypoint(str(env["root"] / deployment["entrypoint"]))
        assert flow.name in ("pucl-retrain", "pucl-pipeline")
        flow.validate_parameters(deployment.get("parameters", {}))
        resolve_params(env["root"], deployment.get("parameters", {}).get("overrides"))
        for schedule in deployment.get("schedules", []):
            CronSchedule(cron=schedule["cron"], timezone=schedule.get("timezone"))


def test_only_transient_errors_are_retried():
    from prefect.states import Failed

    from pucl.errors import DataError
    from pucl.flows._tasks import STAGE_RETRIES, retry_if_transient, stage_task
    from pucl.validation import ValidationFailed
    from pucl.validation.engine import SuiteReport

    def failed(exc: BaseException):
        return Failed(data=exc)

    assert stage_task.retries == STAGE_RETRIES > 0
    assert retry_if_transient(None, None, failed(OSError("disk full"))) is True
    assert retry_if_transient(None, None, failed(ConnectionError("reset"))) is True
    assert retry_if_transient(None, None, failed(DataError("missing input"))) is False
    assert retry_if_transient(None, None,
                              failed(ValidationFailed(SuiteReport("s", [])))) is False
    assert retry_if_transient(None, None, failed(ValueError("bug"))) is False


def test_points_sharing_an_encoder_train_it_once(env, executions, monkeypatch):
    """Two variants of one seed differ only downstream of pretraining: with two workers
    they would both start training the same encoder at once. The second waits for the
    first and restores its encoder from the cache."""
    from prefect.task_runners import ProcessPoolTaskRunner

    from pucl import tracking
    from pucl.flows.sweep import sweep

    # an earlier test's unreachable server turns tracking off for the rest of the process
    monkeypatch.setenv(tracking.TRACKING_ENV, "on")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", env["uri"])

    spec = {"name": "shared", "seeds": [0],
            "set": {"pretrain.epochs": 1, "paths.pretrain_cache": "data/cache/shared"},
            "variants": {"ce": {}, "nnpu": {"classifier.objective": "nnpu"},
                         "sscl": {"pretrain.loss": "sscl"}}}
    sweep.with_options(task_runner=ProcessPoolTaskRunner(max_workers=3))(  # pucl's default
        spec=spec, project=str(env["root"]))
    reused = {r.info.run_name: r.data.metrics["pretrain_reused"]
              for r in runs(env["client"], "tags.sweep = 'shared' and tags.kind = 'pipeline'")}
    assert reused == {"variant=ce,s0": 0.0, "variant=nnpu,s0": 1.0, "variant=sscl,s0": 0.0}
    assert len(list((env["root"] / "data/cache/shared").iterdir())) == 2
