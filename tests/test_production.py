"""The production cycle of docs/production.md, replayed on small data: create the tracked
dataset, retrain (promoted), retrain again (skipped), add a batch (a new DVC version that
makes the pipeline stale), retrain (promoted or kept, by the margin rule on the same
holdout), score new inputs; and the faults: bad batches, bad model references, a second
retrain while one runs, a retrain killed midway, an unreadable store.

The commands run in-process through the Typer app against one Prefect test server; what
they recorded is read back with a plain MlflowClient and plain DVC commands."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from tests.conftest import (
    ROOT,
    make_project,
    new_store,
    python_path,
    tiny_params,
)
from tests.helpers import dvc, pucl_cli

pytestmark = pytest.mark.filterwarnings("ignore")

MODEL = "pucl-classifier"
ROWS = 2000  # of the 4,000 training rows of mnist5k: the rest arrives as a batch


@pytest.fixture(scope="module")
def cycle(tmp_path_factory, harness):
    """A project on the tracked dataset, the session's Prefect server, one MLflow store."""
    base = tmp_path_factory.mktemp("production")
    uri = new_store(base / "mlflow.db")
    # 100 labelled positives: too few for a 10% validation part
    params = tiny_params(data={"dataset": "tracked", "task": "given"},
                         split={"val_fraction": 0.0})
    with pytest.MonkeyPatch.context() as mp:
        root = make_project(base / "proj", params)
        mp.setenv("PUCL_ROOT", str(root))
        mp.setenv("MLFLOW_TRACKING_URI", uri)
        mp.setenv("PATH", python_path())
        mp.setenv("PUCL_TRACKING", "on")
        mp.chdir(root)
        yield {"root": root, "uri": uri, "client": MlflowClient(uri), "steps": {}}


def pucl(*args: str, code: int = 0):
    from pucl.cli import app

    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == code, (args, result.output, result.stderr, result.exception)
    return result


def champion(client: MlflowClient) -> str:
    return str(client.get_model_version_by_alias(MODEL, "champion").version)


def decision(client: MlflowClient) -> dict[str, str]:
    """The retrain.* tags of the newest retrain run."""
    exp = client.get_experiment_by_name("pucl")
    run = client.search_runs([exp.experiment_id], "tags.kind = 'retrain'", max_results=1,
                             order_by=["attributes.start_time DESC"])[0]
    return {k[len("retrain."):]: v for k, v in run.data.tags.items()
            if k.startswith("retrain.")} | {"run_id": run.info.run_id}


def data_version(root: Path) -> tuple[str, list[str]]:
    files = sorted(p.name for p in (root / "data/dataset/batches").glob("*.npz"))
    return (root / "data/dataset/batches.dvc").read_text(), files


def test_1_init_exports_the_embedded_data_as_a_dvc_version(cycle):
    root = cycle["root"]
    result = pucl("data", "init", "--rows", str(ROWS), "--rest", "arriving.npz")
    assert f"{ROWS} training rows" in result.output
    holdout = np.load(root / "data/dataset/holdout.npz")
    first = np.load(root / "data/dataset/batches/00000.npz")
    rest = np.load(root / "arriving.npz")
    assert len(first["x"]) == ROWS and len(first["x"]) + len(rest["x"]) == 4000
    assert len(holdout["y_test"]) == 1000 and set(np.unique(holdout["y_test"])) == {0, 1}
    # labelled positives are positives, and the task binarised the digits (evens: ~half)
    assert (first["y"][first["pu"] == 1] == 1).all()
    assert 0.4 < first["y"].mean() < 0.6
    assert dvc(root, "status", "data/dataset/batches.dvc").stdout.strip().endswith(
        "up to date.")
    # docs/production.md's step 1 stages exactly what init wrote (it once named a
    # .gitignore that DVC does not write here, and so staged nothing)
    docs = (ROOT / "docs/production.md").read_text()
    staged = re.search(r"^git add (.+?) &&", docs, flags=re.M).group(1).split()
    assert all(list(root.glob(pattern)) for pattern in staged), staged
    pucl("data", "init", code=2)  # never replaces what is there
    # a labelled holdout has no frozen prior to estimate again: one line, nothing changed
    before = (root / "data/dataset/holdout.npz").read_bytes()
    result = pucl("data", "reestimate-prior", code=2)
    assert "is labelled: it has no frozen prior" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert (root / "data/dataset/holdout.npz").read_bytes() == before


def test_2_first_retrain_promotes_a_challenger(cycle):
    client = cycle["client"]
    pucl("retrain", "--no-progress")
    first = decision(client)
    assert first["decision"] == "promoted" and champion(client) == "1"
    assert first["champion_score"] == "none" and 0.5 < float(first["challenger_score"]) <= 1
    assert first["score_kind"] == "labelled"  # mnist5k's labelled test split is the holdout
    cycle["steps"]["first"] = first
    # the registered model scores the holdout (mnist5k's test split, exported) exactly as
    # the challenger's own evaluate stage scored its test split
    pipeline = client.search_runs(
        [client.get_experiment_by_name("pucl").experiment_id],
        f"tags.mlflow.parentRunId = '{first['run_id']}'")[0]
    assert pipeline.data.tags["kind"] == "pipeline" and pipeline.data.tags["entry"] == "retrain"
    assert float(first["challenger_score"]) == pytest.approx(pipeline.data.metrics["accuracy"])
    v1 = client.get_model_version(MODEL, "1").tags
    assert float(v1["holdout_score"]) == pytest.approx(float(first["challenger_score"]))
    assert v1["holdout_sha256"] == first["holdout_sha256"]
    # the run says which data trained it (the runs table's Dataset column)
    inputs = client.get_run(first["run_id"]).inputs.dataset_inputs
    assert inputs and inputs[0].dataset.name == "tracked:given"
    version_tag = client.get_model_version(MODEL, "1").tags["data.version"]
    assert inputs[0].dataset.digest.startswith(version_tag)
    artifacts = {a.path for a in client.list_artifacts(first["run_id"], "figures")}
    assert artifacts == {"figures/champion_holdout_score.png",
                         "figures/prior_by_data_version.png"}
    # the MLflow UI opens the experiment on its model-training view
    exp = client.get_experiment_by_name("pucl")
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"


def test_3_retrain_without_changes_is_skipped(cycle):
    client = cycle["client"]
    versions = len(client.search_model_versions(f"name = '{MODEL}'"))
    pucl("retrain", "--no-progress")
    again = decision(client)
    assert again["decision"] == "skipped" and champion(client) == "1"
    assert len(client.search_model_versions(f"name = '{MODEL}'")) == versions  # no training
    assert again["holdout_sha256"] == cycle["steps"]["first"]["holdout_sha256"]


def test_4_bad_batches_are_refused_whole(cycle, tmp_path):
    root = cycle["root"]
    before = data_version(root)
    x = np.zeros((5, 1, 28, 28), np.uint8)
    holdout = np.load(root / "data/dataset/holdout.npz")["x_test"]
    cases = {
        "wrong shape": ({"x": np.zeros((5, 1, 32, 32), np.uint8), "pu": np.zeros(5)},
                        "[1, 32, 32] per row"),
        "wrong dtype": ({"x": x.astype(np.int16), "pu": np.zeros(5)},
                        "got int16 [5, 1, 28, 28]; allowed: images: uint8"),
        "float pixels above 1": ({"x": x + 2.0, "pu": np.zeros(5)},
                                 "float images must hold pixels in [0, 1]"),
        "labels outside {0, 1}": ({"x": x, "pu": np.array([0, 1, 2, 0, 0])}, "pu holds [2]"),
        "a holdout row": ({"x": holdout[:3], "pu": np.zeros(3)},
                          "rows also in the frozen holdout"),
        "a test split": ({"x": x, "pu": np.zeros(5), "x_test": x, "y_test": np.zeros(5)},
                         "the holdout is frozen"),
        "empty": ({"x": x[:0], "pu": np.zeros(0)}, "empty"),
    }
    for name, (arrays, message) in cases.items():
        path = tmp_path / f"{name}.npz"
        np.savez(path, **arrays)
        result = pucl("data", "add", str(path), code=2)
        assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1, name
    (tmp_path / "empty_folder").mkdir()
    result = pucl("data", "add", str(tmp_path / "empty_folder"), code=2)
    assert "holds no image" in result.stderr
    assert data_version(root) == before  # nothing appended, no new DVC version


def test_5_a_new_batch_is_a_new_version_and_retrain_decides_by_the_margin(cycle):
    root, client = cycle["root"], cycle["client"]
    before = data_version(root)
    result = pucl("data", "add", "arriving.npz")
    assert "batch 00001" in result.output
    after = data_version(root)
    assert after[1] == ["00000.npz", "00001.npz"] and after[0] != before[0]
    status = dvc(root, "status", "build_split").stdout
    assert "data/dataset" in status  # the pipeline is stale from the split on
    added = [r for r in client.search_runs(
        [client.get_experiment_by_name("pucl").experiment_id], "tags.kind = 'data'")
        if r.data.tags.get("data.batch") == "00001"]
    assert added and added[0].data.metrics["rows"] == 4000 - ROWS
    # watched: the champion (v1) on the batch's own P and U, against its labelled holdout
    # accuracy; the same digits, so no alert
    watched = added[0].data.metrics
    v1_score = float(client.get_model_version(MODEL, "1").tags["holdout_score"])
    assert watched["monitor.reference_accuracy"] == pytest.approx(v1_score)
    assert 0.5 < watched["monitor.estimated_accuracy"] <= 1 and "monitor.alert" not in \
        added[0].data.tags and added[0].data.tags["monitor.champion_version"] == "1"

    pucl("retrain", "--no-progress")
    third = decision(client)
    first = cycle["steps"]["first"]
    # the watched batch joins the retrain figures
    assert "figures/monitor_by_batch.png" in {
        a.path for a in client.list_artifacts(third["run_id"], "figures")}
    assert third["holdout_sha256"] == first["holdout_sha256"]  # arriving data never enters it
    assert float(third["champion_score"]) == pytest.approx(float(first["challenger_score"]))
    margin = 0.0
    better = float(third["challenger_score"]) > float(third["champion_score"]) + margin
    assert third["decision"] == ("promoted" if better else "kept")
    assert champion(client) == (third["challenger_version"] if better else "1")
    assert third["prior_drift"] != "none"  # U's prior estimated again, compared
    # and the prior of what arrived, on its own (case_control: U holds every arriving row)
    assert int(third["new_rows"]) == 4000 - ROWS
    assert 0.0 <= float(third["new_data_prior"]) <= 1.0
    v1_prior = float(client.get_model_version(MODEL, "1").tags["prior_estimate"])
    assert float(third["new_data_drift"]) == pytest.approx(
        float(third["new_data_prior"]) - v1_prior)
    cycle["steps"]["third"] = third


def test_5b_a_worse_challenger_is_kept(cycle):
    client = cycle["client"]
    before = champion(client)
    pucl("retrain", "--no-progress", "--set", "classifier.epochs=1", "--set",
         "classifier.lr=1e-5")
    weak = decision(client)
    assert weak["decision"] == "kept" and champion(client) == before
    assert float(weak["challenger_score"]) <= float(weak["champion_score"])
    assert weak["champion_version"] == before != weak["challenger_version"]
    # the same data, params and code again: that challenger would lose again, so a
    # schedule does not retrain it on every tick (the soak of reports/reliability did)
    versions = len(client.search_model_versions(f"name = '{MODEL}'"))
    pucl("retrain", "--no-progress", "--set", "classifier.epochs=1", "--set",
         "classifier.lr=1e-5")
    again = decision(client)
    assert again["decision"] == "skipped" and champion(client) == before
    assert again["reason"] == (f"data, params and code unchanged since "
                               f"v{weak['challenger_version']} was trained and kept")
    assert len(client.search_model_versions(f"name = '{MODEL}'")) == versions


def test_6_predict_scores_new_inputs_with_the_champion(cycle, tmp_path):
    import mlflow.pyfunc

    root = cycle["root"]
    rows = np.load(root / "arriving.npz")["x"][:50]
    np.savez(tmp_path / "new.npz", x=rows)
    # no project data needed: another directory, only the store and a model (in this
    # process; a fresh process loads the model in MLflow's own command line below)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    result = pucl_cli(outside, "predict", str(tmp_path / "new.npz"), "--out", "scores.parquet",
                      "--model", f"{MODEL}@champion", "--tracking-uri", cycle["uri"],
                      env={"PUCL_ROOT": None, "MLFLOW_TRACKING_URI": None})
    assert result.returncode == 0, result.stderr
    scores = pd.read_parquet(outside / "scores.parquet")
    assert list(scores.columns) == ["id", "score", "label"] and len(scores) == 50
    assert ((scores["label"] == 1) == (scores["score"] >= 0.5)).all()
    # the same scores as MLflow's own pyfunc loading of the registered champion
    mlflow.set_tracking_uri(cycle["uri"])
    served = mlflow.pyfunc.load_model(f"models:/{MODEL}@champion")
    np.testing.assert_allclose(scores["score"].to_numpy(),
                               served.predict(rows.astype(np.float32) / 255), atol=1e-5)
    # and the signature says what it takes
    assert served.metadata.get_input_schema().inputs[0].shape == (-1, 1, 28, 28)
    # and MLflow's command line, which knows nothing of pucl, gives them too
    (tmp_path / "input.json").write_text(json.dumps(
        {"inputs": (rows[:5].astype(np.float32) / 255).tolist()}))
    served_cli = subprocess.run(
        [sys.executable, "-m", "mlflow", "models", "predict", "-m",
         f"models:/{MODEL}@champion", "-i", str(tmp_path / "input.json"), "-t", "json",
         "--env-manager", "local", "-o", str(tmp_path / "out.json")],
        env={**os.environ, "MLFLOW_TRACKING_URI": cycle["uri"]}, cwd=outside,
        capture_output=True, text=True)
    assert served_cli.returncode == 0, served_cli.stderr
    predictions = json.loads((tmp_path / "out.json").read_text())["predictions"]
    np.testing.assert_allclose(predictions, scores["score"].to_numpy()[:5], atol=1e-5)

    for args, message in [
        (["--model", f"{MODEL}@nope"], "has no alias 'nope' (aliases: champion)"),
        (["--model", "nobody"], "no registered model 'nobody'"),
        (["--model", f"{MODEL}/99"], "has no version 99"),
    ]:
        result = pucl("predict", str(tmp_path / "new.npz"), "--out",
                      str(tmp_path / "s.csv"), *args, code=2)
        assert message in result.stderr
    assert not (tmp_path / "s.csv").exists()


def test_6b_predict_scores_with_one_whole_version_while_the_alias_moves(cycle, tmp_path,
                                                                       monkeypatch):
    """A promotion lands between predict resolving @champion and loading it: predict
    scores with the version it resolved, whole, and names it (it loads NAME/VERSION, never
    the alias a second time)."""
    import mlflow.pyfunc

    from pucl import tracking

    client = cycle["client"]
    before = champion(client)
    other = max((v.version for v in client.search_model_versions(f"name = '{MODEL}'")
                 if v.version != before), key=int)
    rows = np.load(cycle["root"] / "arriving.npz")["x"][:50]
    np.savez(tmp_path / "new.npz", x=rows)
    mlflow.set_tracking_uri(cycle["uri"])
    old, new = (mlflow.pyfunc.load_model(f"models:/{MODEL}/{v}").predict(
        rows.astype(np.float32) / 255) for v in (before, other))
    assert not np.allclose(old, new)  # else the check below could not tell them apart
    load_version = tracking.load_version

    def promoted_meanwhile(uri, name, version):
        client.set_registered_model_alias(MODEL, "champion", other)
        return load_version(uri, name, version)

    monkeypatch.setattr(tracking, "load_version", promoted_meanwhile)
    try:
        result = pucl("predict", str(tmp_path / "new.npz"), "--out", str(tmp_path / "s.csv"),
                      "--model", f"{MODEL}@champion", "--no-progress")
    finally:
        client.set_registered_model_alias(MODEL, "champion", before)
    assert f"with {MODEL} v{before}" in result.output
    np.testing.assert_allclose(pd.read_csv(tmp_path / "s.csv")["score"], old, atol=1e-5)


def test_7_a_second_retrain_refuses_while_one_runs(cycle):
    from filelock import FileLock

    root, client = cycle["root"], cycle["client"]
    before = champion(client)
    with FileLock(root / "data/runs/retrain.lock"):
        result = pucl("retrain", "--no-progress", code=2)
    assert "another retrain is running" in result.stderr
    assert champion(client) == before


def test_7b_a_failed_data_gate_keeps_the_champion(cycle):
    client = cycle["client"]
    before = champion(client)
    versions = len(client.search_model_versions(f"name = '{MODEL}'"))
    # a band no pseudo-labelling meets: the pseudo_labels contract fails inside the pipeline
    pucl("retrain", "--no-progress", "--set", "validation.positive_fraction=[0.94,0.95]")
    gate = decision(client)
    assert gate["decision"] == "kept" and gate["reason"].startswith("data contract failed")
    assert "pseudo_labels" in gate["reason"]
    assert champion(client) == before
    assert len(client.search_model_versions(f"name = '{MODEL}'")) == versions


def test_8_a_retrain_killed_midway_leaves_alias_and_data_as_they_were(cycle):
    root, client = cycle["root"], cycle["client"]
    before_alias, before_data = champion(client), data_version(root)
    from prefect.settings import PREFECT_API_URL

    # the test server: the killed process starts no server of its own
    env = {**os.environ, "PATH": python_path(), "PREFECT_API_URL": PREFECT_API_URL.value()}
    runs = root / "data/runs"
    earlier = set(runs.glob("retrain-*"))
    # new params: a real retrain starts (not skipped)
    proc = subprocess.Popen([sys.executable, "-m", "pucl.cli", "retrain", "--no-progress",
                             "--set", "pretrain.epochs=30"], cwd=root, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.time() + 240
    while not any((d / "params.yaml").exists()  # the challenger's pipeline has begun
                  for d in set(runs.glob("retrain-*")) - earlier):
        assert proc.poll() is None and time.time() < deadline, "retrain ended before the kill"
        time.sleep(0.5)
    time.sleep(1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert champion(client) == before_alias and data_version(root) == before_data
    from filelock import FileLock

    with FileLock(root / "data/runs/retrain.lock", timeout=0):  # released by the kill
        pass


def test_8b_the_next_pass_marks_what_a_killed_one_left(cycle):
    """The killed pass of test_8 left its runs RUNNING. A pass killed a little later, after
    registering its challenger, also leaves a version that was never scored: one is made
    here as the flow makes it. The next pass marks both, and moves nothing else."""
    client = cycle["client"]
    exp = client.get_experiment_by_name("pucl")

    def running():
        return client.search_runs([exp.experiment_id], "attributes.status = 'RUNNING'")

    killed = [r for r in running() if r.data.tags.get("kind") == "retrain"]
    assert len(killed) == 1 and len(running()) > 1  # its pipeline's runs too
    before = {int(v.version): dict(v.tags) for v in client.search_model_versions(
        f"name = '{MODEL}'")}
    alias = champion(client)
    source = client.get_model_version(MODEL, alias)
    unscored = client.create_model_version(MODEL, source.source, run_id=source.run_id,
                                           tags={"retrain_run_id": killed[0].info.run_id})
    pucl("retrain", "--no-progress")
    assert running() == []
    again = client.get_run(killed[0].info.run_id)
    assert again.info.status == "FAILED" and again.data.tags["retrain.orphan"] == "true"
    assert client.get_model_version(MODEL, unscored.version).tags["retrain.orphan"] == "true"
    for version, tags in before.items():  # scored versions are left as they were
        assert dict(client.get_model_version(MODEL, str(version)).tags) == tags
    assert champion(client) == alias


def test_9_an_unreadable_store_is_one_line(cycle, tmp_path, monkeypatch):
    broken = tmp_path / "broken.db"
    broken.write_text("not a database")
    np.savez(tmp_path / "x.npz", x=np.zeros((2, 1, 28, 28), np.uint8))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{broken}")
    for args in (["retrain"], ["predict", str(tmp_path / "x.npz"), "--out",
                               str(tmp_path / "o.csv")]):
        result = pucl(*args, code=2)
        assert result.stderr.strip().splitlines() == [
            f"pucl: error: MLflow store sqlite:///{broken} cannot be used (DatabaseError: "
            "(sqlite3.DatabaseError) file is not a database)" + (
                "; retraining needs its model registry" if args[0] == "retrain" else "")]
    assert not (tmp_path / "o.csv").exists()


def test_10_dvc_push_and_pull_restore_the_dataset(cycle):
    root = cycle["root"]
    before = data_version(root)
    dvc(root, "push", "data/dataset/batches.dvc", "data/dataset/holdout.npz.dvc")
    assert (root / "dvc-remote").is_dir()
    import shutil

    shutil.rmtree(root / "data/dataset/batches")
    shutil.rmtree(root / ".dvc/cache")
    dvc(root, "pull", "data/dataset/batches.dvc")
    assert data_version(root) == before
