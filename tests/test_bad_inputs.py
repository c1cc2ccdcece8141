"""Bad input, table-driven: each case gets exit code 2, one line on stderr naming the bad
value, no traceback, and leaves every output of a finished pipeline byte-identical."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.conftest import copy_project, deep_update, new_store, python_path
from tests.helpers import dvc, pucl_cli, stage

PUCL = [sys.executable, "-m", "pucl.cli"]
OWN_NPZ = {"data": {"dataset": "npz", "task": "given", "path": "mine.npz"}}


def _npz(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def _own(x) -> bytes:
    """An npz of one's own: `x` and 10 labelled positives of 60 rows, with a test part."""
    pu, y_test = np.r_[np.ones(10), np.zeros(50)].astype(np.int64), np.r_[0, 1, 0, 1]
    return _npz(x=x, pu=pu, x_test=x[:4], y_test=y_test)


def _stage(name: str) -> list[str]:
    return [sys.executable, "-m", "pucl.stages", name]


@dataclass
class Case:
    name: str
    command: list[str]
    message: str
    params: dict | None = None          # deep-merged into params.yaml
    params_text: str | None = None      # params.yaml replaced by this text
    files: dict[str, bytes | None] = field(default_factory=dict)  # None deletes the file
    env: dict[str, str] = field(default_factory=dict)


CASES = [
    Case("unknown objective", PUCL + ["repro"], "invalid parameter 'pretrain.loss' = 'simclr'",
         params={"pretrain": {"loss": "simclr"}}),
    Case("misspelt key", PUCL + ["repro"], "did you mean 'pretrain.temperature'",
         params={"pretrain": {"temprature": 0.2}}),
    Case("unknown section", PUCL + ["repro"], "unknown parameter 'trainer'",
         params={"trainer": {"epochs": 3}}),
    Case("n_p zero", PUCL + ["repro"], "invalid parameter 'split.n_p' = 0",
         params={"split": {"n_p": 0}}),
    Case("n_p above the positives", PUCL + ["repro"], "split.n_p = 100000 exceeds the",
         params={"split": {"n_p": 100000}}),
    Case("validation part too small", PUCL + ["repro"],
         "split.val_fraction = 0.01 holds out 2 labelled positives and 40 unlabeled rows",
         params={"split": {"val_fraction": 0.01}}),
    Case("validation share above a half", PUCL + ["repro"],
         "invalid parameter 'split.val_fraction' = 0.7", params={"split": {"val_fraction": 0.7}}),
    Case("negative temperature", PUCL + ["repro"], "invalid parameter 'pretrain.temperature'",
         params={"pretrain": {"temperature": -1.0}}),
    Case("given prior without value", PUCL + ["repro"], "'given' needs prior.value",
         params={"prior": {"method": "given"}}),
    Case("prior outside (0, 1)", PUCL + ["repro"], "invalid parameter 'prior.value' = 1.5",
         params={"prior": {"method": "given", "value": 1.5}}),
    Case("loss prior outside [0, 1)", PUCL + ["repro"], "invalid parameter 'pretrain.prior'",
         params={"pretrain": {"prior": 1.2}}),
    Case("unknown dataset", PUCL + ["repro"], "unknown dataset 'cifar'",
         params={"data": {"dataset": "cifar"}}),
    Case("task of another dataset", PUCL + ["repro"],
         "task 'cifar-i' is not defined for dataset 'mnist5k'",
         params={"data": {"task": "cifar-i"}}),
    Case("unknown device", PUCL + ["check"], "invalid parameter 'base.device' = 'tpu'",
         params={"base": {"device": "tpu"}}),
    Case("removed precision", PUCL + ["check"],  # an old params file: float32 only now
         "unknown parameter 'base.precision' (allowed here: seed, device, threads, fit_workers)",
         params={"base": {"precision": "fp32"}}),
    Case("unknown encoder", PUCL + ["check"], "invalid parameter 'pretrain.encoder'",
         params={"pretrain": {"encoder": "vit"}}),
    Case("inverted band", PUCL + ["repro"], "0 <= low < high <= 1",
         params={"validation": {"positive_fraction": [0.9, 0.1]}}),
    Case("negative neighbours", PUCL + ["check"], "invalid parameter 'classifier.neighbours'",
         params={"classifier": {"neighbours": -1}}),
    Case("neighbours above the training rows", _stage("train_classifier"),
         # U's 1,000 rows (TINY_PARAMS) and the labelled positives outside it, less the
         # validation part's 115
         "classifier.neighbours = 100000 exceeds the 1032 training rows (allowed: 0 to 1032)",
         params={"classifier": {"neighbours": 100000}}),
    Case("unknown test-time view", PUCL + ["check"], "invalid parameter 'evaluate.tta'",
         params={"evaluate": {"tta": "rotate"}}),
    Case("test-time shift too far", PUCL + ["check"],
         "invalid parameter 'evaluate.tta_shift' = 9: Input should be less than or equal to 4",
         params={"evaluate": {"tta_shift": 9}}),
    Case("params not YAML", PUCL + ["repro"], "is not valid YAML", params_text="pretrain: [\n"),
    Case("params not a mapping", PUCL + ["repro"], "must hold a mapping",
         params_text="- a\n- b\n"),
    Case("corrupt model", _stage("pupl_label"), "cannot read model",
         files={"data/pretrain/model.pt": b"not a torch file"}),
    Case("missing model", _stage("pupl_label"), "run the pretrain stage first",
         files={"data/pretrain/model.pt": None}),
    Case("corrupt classifier", _stage("evaluate"), "cannot read classifier",
         files={"data/classifier/head.pt": b"\x00" * 16}),
    Case("corrupt manifest", _stage("estimate_prior"), "cannot read",
         files={"data/split/manifest.parquet": b"PAR1 but not really"}),
    Case("prior report not JSON", _stage("evaluate"), "is not valid JSON",
         files={"data/prior/prior.json": b"{prior: "}),
    Case("override without value", PUCL + ["run", "--set", "split.n_p"], "expected key=value"),
    Case("missing sweep file", PUCL + ["sweep", "--grid", "nope.yaml"],
         "sweep file not found: nope.yaml"),
    Case("bad cron", PUCL + ["serve", "--cron", "61 * * * *"], "invalid --cron '61 * * * *'"),
    Case("MLflow store missing", PUCL + ["compare"], "no-such-dir/mlflow.db does not exist",
         env={"MLFLOW_TRACKING_URI": "sqlite:////proc/no-such-dir/mlflow.db"}),
    Case("unknown experiment", PUCL + ["compare", "--experiment", "nosuch"],
         "no experiment 'nosuch' in the MLflow store"),
    Case("channels-last images", PUCL + ["check"], "give [n, channels, height, width]",
         params=OWN_NPZ, files={"mine.npz": _own(np.zeros((60, 28, 28, 3), np.uint8))}),
    Case("float pixels above 1", PUCL + ["check"], "(divide by 255, or give uint8 pixels)",
         params=OWN_NPZ, files={"mine.npz": _own(np.full((60, 28, 28), 255.0))}),
    Case("text file named .npz", PUCL + ["check"], "mine.npz is not an .npz archive",
         params=OWN_NPZ, files={"mine.npz": b"x,pu\n1,0\n"}),
    Case("dataset files not there", PUCL + ["check"], "or data.download: true to fetch them",
         params={"data": {"dataset": "mnist"}, "paths": {"data_root": "no-such-dir"}}),
]


@pytest.fixture(scope="module")
def finished(tmp_path_factory, finished_tiny):
    """A project whose pipeline ran to the end (a copy of the session's one)."""
    base = tmp_path_factory.mktemp("bad")
    with pytest.MonkeyPatch.context() as mp:
        root = copy_project(finished_tiny, base / "proj")
        mp.setenv("PUCL_ROOT", str(root))
        mp.setenv("MLFLOW_TRACKING_URI", new_store(base / "mlflow.db"))
        mp.setenv("PATH", python_path())
        assert dvc(root, "status").stdout.strip().endswith("up to date.")
        yield root


def invoke(command: list[str], root: Path, env: dict[str, str]
           ) -> subprocess.CompletedProcess:
    """`pucl ...` or `python -m pucl.stages NAME` in this process, in `root`: the same entry
    points, exit codes and stderr as the commands, without a Python start per case (the
    commands themselves run as processes in test_cli.py)."""
    if command[:len(PUCL)] != PUCL:
        return stage(root, command[-1], check=False, env=env)
    return pucl_cli(root, *command[len(PUCL):], env=env)


def _snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((root / "data").rglob("*")) if p.is_file()}


def test_there_are_at_least_twenty_cases():
    assert len(CASES) >= 20 and len({c.name for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_refused_in_one_line_and_changes_nothing(finished, case):
    root = finished
    params_file = root / "params.yaml"
    original_params = params_file.read_text()
    before = _snapshot(root)
    saved = {rel: (root / rel).read_bytes() for rel in case.files if (root / rel).exists()}
    try:
        if case.params is not None:
            params_file.write_text(yaml.safe_dump(deep_update(yaml.safe_load(original_params),
                                                              case.params)))
        if case.params_text is not None:
            params_file.write_text(case.params_text)
        for rel, content in case.files.items():
            if content is None:
                (root / rel).unlink()
            else:
                (root / rel).write_bytes(content)
        result = invoke(case.command, root, case.env)
    finally:
        params_file.write_text(original_params)
        for rel in case.files:
            if rel in saved:
                (root / rel).write_bytes(saved[rel])
            else:
                (root / rel).unlink(missing_ok=True)
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert case.message in lines[0], lines[0]
    assert "Traceback" not in result.stderr
    assert _snapshot(root) == before  # no output written, deleted or half-replaced


def test_read_only_commands_create_nothing_in_the_store(finished, tmp_path):
    """compare, predict and ui only read: an unknown experiment or model is one line, and
    neither it nor a store at a mistyped path comes into being."""
    from mlflow.tracking import MlflowClient

    uri = os.environ["MLFLOW_TRACKING_URI"]
    before = sorted(e.name for e in MlflowClient(uri).search_experiments())
    np.savez(tmp_path / "new.npz", x=np.zeros((2, 28, 28), np.uint8))
    for command, message in [
            (["compare", "--experiment", "nosuch"], "(experiments: Default"),
            (["predict", str(tmp_path / "new.npz"), "--out", str(tmp_path / "s.csv"),
              "--model", "nosuch"], "no registered model 'nosuch'")]:
        result = invoke(PUCL + command, finished, {})
        assert result.returncode == 2 and message in result.stderr, result.stderr
    assert sorted(e.name for e in MlflowClient(uri).search_experiments()) == before
    missing = tmp_path / "typo" / "mlflow.db"
    (tmp_path / "typo").mkdir()
    for command in (["compare"], ["ui"]):
        result = invoke(PUCL + command, finished, {"MLFLOW_TRACKING_URI": f"sqlite:///{missing}"})
        assert result.returncode == 2 and "does not exist" in result.stderr, result.stderr
    assert not missing.exists()


def test_plain_dvc_repro_refuses_and_dvc_checkout_restores(finished):
    """Without pucl, DVC removes a stage's outputs before running it; the stage then refuses
    the bad params before doing any work, and `dvc checkout` brings the outputs back."""
    root = finished
    params_file = root / "params.yaml"
    original = params_file.read_text()
    before = _snapshot(root)
    try:
        params_file.write_text(yaml.safe_dump(deep_update(yaml.safe_load(original),
                                                          {"pupl": {"method": "kmeans"}})))
        result = dvc(root, "repro", check=False)
        assert result.returncode != 0
        assert "invalid parameter 'pupl.method' = 'kmeans'" in result.stderr + result.stdout
        assert "Traceback" not in result.stderr + result.stdout
        dvc(root, "checkout")
    finally:
        params_file.write_text(original)
    assert _snapshot(root) == before
    assert dvc(root, "status").stdout.strip().endswith("up to date.")


def test_missing_or_unreadable_data_root_is_named(tmp_path):
    """A dataset read from files refuses a data root that is missing or not a directory
    (registered here as a stand-in: the embedded dataset reads no files)."""
    import numpy as np

    from pucl.data import catalog
    from pucl.errors import DataError

    @catalog.register("files-test", tasks=("mnist-i",), classes=tuple(range(10)),
                       image_shape=(1, 2, 2), needs_root=True)
    def _load(root, **_):
        x = np.zeros((4, 1, 2, 2), np.uint8)
        return catalog.ImageData("files-test", x, np.arange(4), x, np.arange(4))

    try:
        with pytest.raises(DataError, match=f"data root {tmp_path / 'nope'} does not exist"):
            catalog.load_dataset("files-test", root=str(tmp_path / "nope"))
        (tmp_path / "file").write_text("x")
        with pytest.raises(DataError, match="is not a readable directory"):
            catalog.load_dataset("files-test", root=str(tmp_path / "file"))
        assert len(catalog.load_dataset("files-test", root=str(tmp_path)).x_train) == 4
    finally:
        catalog.DATASETS.pop("files-test")


def test_pucl_debug_shows_the_traceback_above_the_line(finished):
    env = {"MLFLOW_TRACKING_URI": "sqlite:////proc/no-such-dir/mlflow.db"}
    plain = invoke(PUCL + ["compare"], finished, env)
    debug = invoke(PUCL + ["compare"], finished, {**env, "PUCL_DEBUG": "1"})
    assert plain.returncode == debug.returncode == 2
    assert "Traceback" not in plain.stderr
    assert "Traceback" in debug.stderr and "StoreUnavailable" in debug.stderr
    assert debug.stderr.strip().splitlines()[-1] == plain.stderr.strip()


def test_a_run_is_found_by_name_without_a_store(finished, tmp_path):
    """With tracking off there is no store; a run's name still finds its directory, and
    scores as its files say (the project after `pucl repro` is such a run)."""
    from pucl.errors import PuclError
    from pucl.production import serving

    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "mine").symlink_to(finished)
    missing = f"sqlite:///{tmp_path / 'none.db'}"
    by_name, label = serving.open_model("mine", missing, tmp_path / "runs")
    by_path, _ = serving.open_model(str(finished), None)
    x = np.random.default_rng(0).random((4, 1, 28, 28)).astype(np.float32)
    assert label == "run mine" and by_name.in_shape == (1, 28, 28)
    np.testing.assert_array_equal(by_name.predict(x), by_path.predict(x))
    with pytest.raises(PuclError, match="none.db does not exist"):
        serving.open_model("other", missing, tmp_path / "runs")
    assert not (tmp_path / "none.db").exists()
