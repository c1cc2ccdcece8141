"""Prefect flows and MLflow tracking, on tiny params, against the tests' temporary Prefect
server (tests/conftest.py) and a temporary sqlite MLflow store (tests/conftest.py). What was
tracked is read back with a plain `MlflowClient`, not through pucl's own tracking module.
The sweep flow's tests are in test_sweep_flows.py, so the two run on separate workers."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
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

from tests.conftest import new_store
from tests.helpers import STAGES, artifact_paths, children, dvc, read_metrics, run, runs, stage

pytestmark = pytest.mark.filterwarnings("ignore")

# translated test-time views: the exported model must carry them (the sweep's module
# runs one view, as the other pipeline tests: 9 views cost every evaluate its export)
PROJECT_PARAMS = {"evaluate": {"tta_shift": 1}}


@pytest.fixture(scope="module")
def executions(flows_env, harness):
    """The same tiny params run twice: by DVC's stage commands and by the pipeline flow.
    The stages run in this process (tests.helpers.stage: the code `python -m pucl.stages
    NAME` runs), then `dvc commit` records them as `dvc repro` would: six fresh processes
    cost this module about 40 s of imports, and test_repro_is_idempotent_and_selective
    reruns two stages as DVC's own processes, from that lock."""
    from pucl.flows.pipeline import pipeline

    root = flows_env["root"]
    stale = set(json.loads(dvc(root, "status", "--json").stdout))  # what repro would run
    for name in STAGES:
        stage(root, name)
    dvc(root, "commit", "--force")
    # a copy as the stages left it, for test_repro_is_idempotent_and_selective
    repro_copy = root.parent / "repro-copy"
    shutil.copytree(root, repro_copy)
    flow_logs, lines = logging.getLogger("prefect.flow_runs"), []  # Prefect's: not propagated
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())
    flow_logs.addHandler(handler)
    try:
        summary = pipeline(run_name="flow-run", project=str(root), progress=False,
                           tags={"preset": "tiny", "variant": "plain"})
    finally:
        flow_logs.removeHandler(handler)
    return {"flow": summary, "stale_at_first": stale, "repro_copy": repro_copy,
            "flow_log": lines}


def test_the_flows_log_ends_with_what_the_run_gave_and_where_it_is(executions):
    """On a worker the flow's log is often all there is to read."""
    summary = executions["flow"]
    metrics = summary["metrics"]
    (line,) = [m for m in executions["flow_log"] if m.startswith("run flow-run: ")]
    assert line.startswith(f"run flow-run: accuracy {metrics['accuracy']:.4f}")
    assert (f"val_est_accuracy {metrics['val_est_accuracy']:.4f} "
            f"[{metrics['val_est_accuracy_low']:.3f}") in line
    assert f"outputs in {summary['workdir']}; MLflow run {summary['mlflow_run_id']}" in line
    assert "val_true" not in line  # diagnostics stay in the table and MLflow


def test_pipeline_flow_gives_the_metrics_of_dvc_repro(flows_env, executions):
    dvc_metrics = json.loads((flows_env["root"] / "data/evaluate/metrics.json").read_text())
    workdir = Path(executions["flow"]["workdir"])
    assert workdir == flows_env["root"] / "data/runs/flow-run"
    flow_metrics = json.loads((workdir / "data/evaluate/metrics.json").read_text())
    assert flow_metrics == dvc_metrics
    assert executions["flow"]["metrics"]["accuracy"] == dvc_metrics["accuracy"]
    # the run directory records the exact params; the DVC outputs were not touched
    snapshot = yaml.safe_load((workdir / "params.yaml").read_text())
    assert snapshot["pretrain"]["epochs"] == 2
    assert dvc(flows_env["root"], "status").stdout.strip().endswith("up to date.")


def test_one_parent_and_one_run_per_stage_per_execution(flows_env, executions):
    """The flow's parent run and its stages' runs (those of `dvc repro`, each stage a
    process of its own, share one parent too: test_repro_is_idempotent_and_selective)."""
    client = flows_env["client"]
    params = yaml.safe_load((flows_env["root"] / "params.yaml").read_text())
    parents = runs(client, "tags.kind = 'pipeline' and tags.entry = 'prefect'")
    assert len(parents) == 1
    parent = parents[0]
    assert parent.info.status == "FINISHED"
    assert parent.data.params["pretrain.temperature"] == str(params["pretrain"]["temperature"])
    assert parent.data.params["pretrain.augment.degrees"] == str(
        params["pretrain"]["augment"]["degrees"])
    assert 0 < parent.data.metrics["gamma"] < 1 and "accuracy" in parent.data.metrics
    # pucl run --preset names its preset and variant
    assert (parent.data.tags["preset"], parent.data.tags["variant"]) == ("tiny", "plain")

    stage_runs = children(client, parent.info.run_id)
    assert [r.info.run_name for r in stage_runs] == list(STAGES)
    for r in stage_runs:
        assert r.info.status == "FINISHED"
        tags = r.data.tags
        assert tags["stage"] == r.info.run_name and tags["kind"] == "stage"
        assert tags["dataset"] == "mnist5k" and tags["task"] == "mnist-i"
        assert len(tags["git_commit"]) == 40
        assert len(tags["dvc_lock"]) == 16  # the lock as it was when the stage started
    by_name = {r.info.run_name: r for r in stage_runs}
    pretrain = by_name["pretrain"]
    assert pretrain.data.params["pretrain.loss"] == params["pretrain"]["loss"]
    assert "split.n_p" not in pretrain.data.params  # each stage logs its own sections
    history = client.get_metric_history(pretrain.info.run_id, "loss")
    assert [m.step for m in history] == list(range(1, params["pretrain"]["epochs"] + 1))

    expected = {
        "build_split": {"summary.json", "manifest.parquet"},
        "estimate_prior": {"prior.json"},
        "pretrain": {"model.pt", "history.csv", "loss.png"},
        "pupl_label": {"labels.parquet", "summary.json"},
        "train_classifier": {"head.pt"},
        "evaluate": {"metrics.json", "roc.png", "roc.csv", "embedding.png"},
    }
    for name, files in expected.items():
        assert files <= artifact_paths(client, by_name[name].info.run_id), name
    evaluate = by_name["evaluate"]
    assert evaluate.data.metrics["accuracy"] == parent.data.metrics["accuracy"]
    assert evaluate.data.tags["model_id"]
    # the stages of `executions` ran before the project had a dvc.lock: they say so
    unlocked = runs(client, "tags.kind = 'stage' and tags.dvc_lock = 'none'")
    assert sorted(r.info.run_name for r in unlocked) == sorted(STAGES)


def test_logged_classifier_reproduces_the_stage_outputs(flows_env, executions):
    """The MLflow model (torch.export format) gives the same P(y=1|x) as encoder + head
    loaded from the stage files."""
    import mlflow.pytorch

    from pucl.classify.deployable import ServedClassifier
    from tests.helpers import first_member

    client = flows_env["client"]
    parent = runs(client, "tags.kind = 'pipeline' and tags.entry = 'prefect'")[0]
    evaluate = [r for r in children(client, parent.info.run_id)
                if r.info.run_name == "evaluate"][0]
    mlflow.set_tracking_uri(flows_env["uri"])
    served = mlflow.pytorch.load_model(f"models:/{evaluate.data.tags['model_id']}")
    workdir = Path(executions["flow"]["workdir"])
    shift = yaml.safe_load((workdir / "params.yaml").read_text())["evaluate"]["tta_shift"]
    assert shift > 0  # the exported model carries the translated views
    model, head = first_member(workdir)
    reference = ServedClassifier(model.encoder, head, shift=shift).eval()
    x = torch.rand(5, 1, 28, 28, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        np.testing.assert_allclose(served(x).numpy(), reference(x).numpy(), atol=1e-6)


def test_predict_scores_with_what_a_run_trained(flows_env, executions, tmp_path, monkeypatch):
    """`pucl predict --model` takes the run the pipeline flow (`pucl run`) wrote: its
    directory, its name (its directory, or its logged classifier in the store from
    outside the project) and a runs:/ URI all score as encoder + head of its files."""
    from typer.testing import CliRunner

    from pucl.classify.deployable import ServedClassifier
    from pucl.cli import app
    from tests.helpers import first_member

    workdir = Path(executions["flow"]["workdir"])
    x = np.random.default_rng(0).integers(0, 256, size=(20, 28, 28), dtype=np.uint8)
    np.savez(tmp_path / "new.npz", x=x)
    shift = yaml.safe_load((workdir / "params.yaml").read_text())["evaluate"]["tta_shift"]
    model, head = first_member(workdir)
    reference = ServedClassifier(model.encoder, head, shift=shift)
    with torch.no_grad():
        expected = reference.eval()(torch.as_tensor(x[:, None] / 255, dtype=torch.float32))
    client = flows_env["client"]
    parent = runs(client, "attributes.run_name = 'flow-run'")[0]
    evaluate = [r for r in children(client, parent.info.run_id) if r.info.run_name == "evaluate"]
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    for where, model in [(flows_env["root"], "data/runs/flow-run"), (flows_env["root"], "flow-run"),
                         (outside, "flow-run"),
                         (outside, f"runs:/{evaluate[0].info.run_id}/classifier"),
                         (outside, f"runs:/{parent.info.run_id}")]:
        monkeypatch.chdir(where)
        monkeypatch.setenv("PUCL_ROOT", str(where))
        result = CliRunner().invoke(app, ["predict", str(tmp_path / "new.npz"), "--out",
                                          str(tmp_path / "s.csv"), "--model", model,
                                          "--tracking-uri", flows_env["uri"], "--no-progress"])
        assert result.exit_code == 0, (model, result.output, result.stderr)
        scores = pd.read_csv(tmp_path / "s.csv")
        np.testing.assert_allclose(scores["score"], expected.numpy(), atol=1e-5, err_msg=model)
    result = CliRunner().invoke(app, ["predict", str(tmp_path / "new.npz"), "--out",
                                      str(tmp_path / "t.csv"), "--model", "nosuch-run",
                                      "--tracking-uri", flows_env["uri"]])
    assert result.exit_code == 2 and "no pipeline run of that name" in result.stderr
    assert not (tmp_path / "t.csv").exists()


def test_failed_data_contract_stops_the_flow(flows_env, executions):
    from pucl.flows.pipeline import pipeline
    from pucl.validation import ValidationFailed

    with pytest.raises(ValidationFailed, match="validation suite 'pseudo_labels' failed"):
        pipeline(overrides={"validation.positive_fraction": [0.96, 1.0]}, run_name="refused",
                 project=str(flows_env["root"]), progress=False)
    client = flows_env["client"]
    parent = runs(client, "attributes.run_name = 'refused'")[0]
    assert parent.info.status == "FAILED"
    stages = {r.info.run_name: r for r in children(client, parent.info.run_id)}
    assert list(stages) == ["build_split", "estimate_prior", "pretrain", "pupl_label"]
    assert stages["pupl_label"].info.status == "FAILED"
    assert "validation/pseudo_labels.json" in artifact_paths(
        client, stages["pupl_label"].info.run_id)
    assert not (flows_env["root"] / "data/runs/refused/data/pupl/labels.parquet").exists()


def test_unreachable_tracking_server_still_completes_and_says_so_once(flows_env, executions,
                                                                       monkeypatch, capfd):
    import socket

    from pucl.flows.pipeline import pipeline

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{port}")
    capfd.readouterr()
    summary = pipeline(run_name="offline", project=str(flows_env["root"]), progress=False)
    err = capfd.readouterr().err
    assert summary["mlflow_run_id"] is None
    assert (Path(summary["workdir"]) / "data/evaluate/metrics.json").exists()
    lines = [line for line in err.splitlines() if "MLflow" in line]
    assert len(lines) == 1 and "results are written locally only" in lines[0], err


def test_serve_registers_a_deployment_with_the_cron_schedule(flows_env, harness):
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL

    api = PREFECT_API_URL.value()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pucl.cli", "serve", "--cron", "*/30 3 * * *", "--name",
         "nightly"], cwd=flows_env["root"], env={**os.environ, "PREFECT_API_URL": api},
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
        assert deployment.parameters["project"] == str(flows_env["root"])
        assert deployment.parameters["wait"] == 600  # a scheduled pass waits for a manual one
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_prefect_yaml_deployments_point_at_real_flows(flows_env):
    from prefect.client.schemas.schedules import CronSchedule
    from prefect.flows import load_flow_from_entrypoint

    from pucl.stages.runner import resolve_params

    spec = yaml.safe_load((flows_env["root"] / "prefect.yaml").read_text())
    assert spec["deployments"]
    for deployment in spec["deployments"]:
        flow = load_flow_from_entrypoint(str(flows_env["root"] / deployment["entrypoint"]))
        assert flow.name in ("pucl-retrain", "pucl-pipeline")
        flow.validate_parameters(deployment.get("parameters", {}))
        resolve_params(flows_env["root"], deployment.get("parameters", {}).get("overrides"))
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




def ran_and_skipped(output: str) -> tuple[set[str], set[str]]:
    ran = set(re.findall(r"Running stage '([^']+)'", output))
    skipped = set(re.findall(r"Stage '([^']+)' didn't change", output))
    return ran, skipped


def test_repro_is_idempotent_and_selective(executions, tmp_path):
    """On a fresh project `dvc repro` runs every stage; once they ran and were committed
    it runs none; a change to the classifier reruns it and what follows (as DVC's own
    processes), nothing before it. (On a copy of the project as the stages left it,
    tracked in a store of its own: this module's other tests count the runs of theirs.)"""
    assert executions["stale_at_first"] == set(STAGES)
    project = executions["repro_copy"]
    # tracking on: test_unreachable_tracking_server_... turns it off for this process
    env = {"PUCL_ROOT": str(project), "MLFLOW_TRACKING_URI": new_store(tmp_path / "m.db"),
           "PUCL_TRACKING": "on"}
    metrics_first = read_metrics(project)
    again = run([sys.executable, "-m", "dvc", "repro"], project, env=env)
    assert ran_and_skipped(again.stdout) == (set(), set(STAGES))

    params = yaml.safe_load((project / "params.yaml").read_text())
    params["classifier"]["epochs"] += 1
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    changed = run([sys.executable, "-m", "dvc", "repro"], project, env=env)
    ran, skipped = ran_and_skipped(changed.stdout)
    assert ran == {"train_classifier", "evaluate"}
    assert skipped == set(STAGES) - ran
    assert read_metrics(project) != metrics_first  # the rerun wrote its own metrics
    # the two stage processes of that one `dvc repro` share one parent run, which its
    # first stage opened and its last closed
    client = MlflowClient(env["MLFLOW_TRACKING_URI"])
    (parent,) = runs(client, "tags.kind = 'pipeline' and tags.entry = 'dvc'")
    assert parent.info.status == "FINISHED"
    assert parent.data.metrics["accuracy"] == read_metrics(project)["accuracy"]
    stage_runs = children(client, parent.info.run_id)
    assert [r.info.run_name for r in stage_runs] == ["train_classifier", "evaluate"]
    for r in stage_runs:
        assert r.info.status == "FINISHED" and r.data.tags["kind"] == "stage"
        assert len(r.data.tags["dvc_lock"]) == 16
