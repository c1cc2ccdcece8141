"""No file pucl reads can run code. A crafted pickle whose unpickling would create a file
(a stand-in for any command) is put where pucl reads: a run's model and head, a
pretraining checkpoint, a saved estimator, a CIFAR-10 batch, an MLflow model. Each is
refused in one line that names the file, and the file is never created."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from pucl.errors import DataError
from tests.conftest import copy_project
from tests.helpers import pucl_cli, stage


class Payload:
    """Unpickled, it opens `marker` for writing, which creates it."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


def plant(path, marker) -> None:
    """Rewrite the torch file at `path` with the payload beside its genuine content, so
    that the file still holds what pucl expects (only the payload is foreign)."""
    content = torch.load(path, weights_only=True)
    torch.save({**content, "note": Payload(marker)}, path)


def test_the_payload_runs_when_unpickled(tmp_path):
    """The control: what every other test refuses would really act if loaded."""
    marker = tmp_path / "ran"
    path = tmp_path / "model.pt"
    torch.save({"state_dict": {}}, path)
    plant(path, marker)
    torch.load(path, weights_only=False)["note"].close()  # what pucl never does
    assert marker.exists()


@pytest.fixture
def finished(finished_tiny, tmp_path):
    return copy_project(finished_tiny, tmp_path / "proj")


@pytest.mark.parametrize("target", ["data/pretrain/model.pt", "data/classifier/head.pt"])
def test_predict_refuses_a_crafted_file_in_a_run(finished, tmp_path, target):
    marker, out = tmp_path / "ran", tmp_path / "scores.csv"
    plant(finished / target, marker)
    inputs = tmp_path / "new.npz"
    np.savez(inputs, x=np.random.default_rng(0).integers(0, 256, (4, 28, 28), np.uint8))
    result = pucl_cli(tmp_path, "predict", str(inputs), "--out", str(out),
                      "--model", str(finished), "--no-progress")
    assert result.returncode == 2, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("pucl: error: refused") and str(finished / target) in last
    assert "io.open" in last  # names what the file holds
    assert not marker.exists() and not out.exists()


@pytest.mark.parametrize(("target", "reader", "outs"), [
    ("data/pretrain/model.pt", "pupl_label", "data/pupl"),
    ("data/classifier/head.pt", "evaluate", "data/evaluate")])
def test_a_stage_refuses_a_crafted_input_and_keeps_its_outputs(finished, tmp_path, target,
                                                               reader, outs, monkeypatch):
    monkeypatch.setenv("PUCL_ROOT", str(finished))
    monkeypatch.setenv("PUCL_TRACKING", "off")
    marker = tmp_path / "ran"
    before = {p: p.read_bytes() for p in (finished / outs).rglob("*") if p.is_file()}
    plant(finished / target, marker)
    result = stage(finished, reader, check=False)
    assert result.returncode == 2
    assert f"refused {'model' if 'model' in target else 'classifier'} " in result.stderr
    assert not marker.exists()
    after = {p: p.read_bytes() for p in (finished / outs).rglob("*") if p.is_file()}
    assert before and after == before


def test_a_crafted_checkpoint_is_refused_not_resumed(tmp_path):
    from pucl.artifacts.pretraining import load_resume_state

    marker, path = tmp_path / "ran", tmp_path / "checkpoint.pt"
    torch.save({"fingerprint": "abc", "epoch": 3}, path)
    assert load_resume_state(path, "abc")["epoch"] == 3  # a genuine one resumes
    plant(path, marker)
    with pytest.raises(DataError, match=r"refused checkpoint .*checkpoint\.pt: .*delete it"):
        load_resume_state(path, "abc")
    assert not marker.exists()


def test_a_crafted_cifar_batch_is_refused(tmp_path):
    from pucl.data.catalog import load_dataset

    base = tmp_path / "cifar-10-batches-py"
    base.mkdir()
    marker = tmp_path / "ran"
    rows = np.zeros((2, 3072), np.uint8)
    for name in [f"data_batch_{k}" for k in range(1, 6)] + ["test_batch"]:
        batch = {b"data": rows, b"labels": [0, 1]}
        if name == "data_batch_3":
            batch[b"batch_label"] = Payload(marker)
        (base / name).write_bytes(pickle.dumps(batch, protocol=2))
    with pytest.raises(DataError, match=r"data_batch_3 is not a CIFAR-10 batch .*io\.open"):
        load_dataset("cifar10", root=str(tmp_path))
    assert not marker.exists()


def test_an_mlflow_model_that_would_unpickle_code_is_refused(tmp_path, tracking_uri):
    import mlflow
    import mlflow.pyfunc

    from pucl import tracking
    from pucl.tracking.models import UnsafeModel

    class Scorer(mlflow.pyfunc.PythonModel):  # pickled whole by MLflow (cloudpickle)
        def __init__(self, marker):
            self.note = Payload(marker)

        def predict(self, context, model_input):
            return model_input

    marker = tmp_path / "ran"
    mlflow.set_tracking_uri(tracking_uri)
    with mlflow.start_run():
        info = mlflow.pyfunc.log_model(name="scorer", python_model=Scorer(marker),
                                       pip_requirements=[])
    assert not marker.exists()  # logging pickled the payload; only unpickling runs it
    with pytest.raises(UnsafeModel, match=r"refused model models:/m-.*mlflow\.pyfunc\.model"):
        tracking.load_uri(tracking_uri, f"models:/{info.model_id}")
    assert not marker.exists()


def test_a_crafted_estimator_file_is_refused_by_load_and_predict(tmp_path):
    from pucl import PUClassifier

    marker = tmp_path / "ran"
    path = tmp_path / "clf.pt"
    torch.save({"format": "pucl.PUClassifier", "version": 1}, path)
    plant(path, marker)
    with pytest.raises(DataError, match=r"refused saved estimator .*clf\.pt: .*io\.open"):
        PUClassifier.load(path)
    inputs = tmp_path / "new.npz"
    np.savez(inputs, x=np.zeros((3, 10), np.float32))
    result = pucl_cli(tmp_path, "predict", str(inputs), "--out", str(tmp_path / "s.csv"),
                      "--model", str(path))
    assert result.returncode == 2 and "refused saved estimator" in result.stderr
    assert not marker.exists() and not (tmp_path / "s.csv").exists()


def test_an_mlflow_pytorch_model_saved_as_a_pickle_is_refused(tmp_path, tracking_uri):
    """MLflow's other pytorch format pickles the whole module: refused with the way to log
    it again, its payload never run."""
    import mlflow
    import mlflow.pytorch

    from pucl import tracking
    from pucl.tracking.models import UnsafeModel

    class Scorer(torch.nn.Module):
        def __init__(self, marker):
            super().__init__()
            self.note = Payload(marker)

        def forward(self, x):
            return x

    marker = tmp_path / "ran"
    mlflow.set_tracking_uri(tracking_uri)
    with mlflow.start_run():
        info = mlflow.pytorch.log_model(Scorer(marker), name="scorer", pip_requirements=[],
                                        serialization_format="pickle")
    assert not marker.exists()
    with pytest.raises(UnsafeModel, match=r"saved as a pickle.*log it again"):
        tracking.load_uri(tracking_uri, f"models:/{info.model_id}")
    assert not marker.exists()
