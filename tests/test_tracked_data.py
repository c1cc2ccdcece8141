"""The pieces of the production cycle without a pipeline: the tracked dataset's format and
loader, batch checks, version digests, locks, the retrain rules, model references, input
reading, and relative paths typed on the command line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pucl import tracking
from pucl.data.tracked import Batch, check_batch, load_tracked
from pucl.errors import DataError, PuclError
from pucl.flows.retrain import fingerprint, params_digest, should_promote
from pucl.params.config import Params, anchor_paths
from pucl.production import datastore, serving
from tests.conftest import make_project
from tests.helpers import pucl_cli


def images(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, 1, 8, 8), dtype=np.uint8)


def write_dataset(directory: Path, batches: list[Batch], x_test, y_test) -> None:
    (directory / "batches").mkdir(parents=True)
    np.savez(directory / "holdout.npz", x_test=x_test, y_test=y_test)
    for i, batch in enumerate(batches):
        np.savez(directory / "batches" / f"{i:05d}.npz", **batch.arrays())


def test_the_loader_concatenates_batches_in_order(tmp_path):
    a = Batch(images(4, 0), np.array([1, 0, 0, 0]), np.array([1, -1, 0, 1]))
    b = Batch(images(3, 1), np.array([0, 1, 0]), np.array([-1, 1, -1]))
    write_dataset(tmp_path, [a, b], images(5, 2), np.array([0, 1, 0, 1, 1]))
    data = load_tracked(path=str(tmp_path))
    np.testing.assert_array_equal(data.x_train, np.concatenate([a.x, b.x]))
    assert data.pu_train.tolist() == [True, False, False, False, False, True, False]
    assert data.y_train.tolist() == [1, -1, 0, 1, -1, 1, -1]
    assert data.y_test.tolist() == [0, 1, 0, 1, 1] and data.x_test.shape == (5, 1, 8, 8)


def test_an_empty_dataset_says_how_to_fill_it(tmp_path):
    with pytest.raises(DataError, match="pucl data init"):
        load_tracked(path=str(tmp_path))


@pytest.mark.parametrize("arrays,message", [
    ({"x": images(3, 0)}, "has no array 'pu'"),
    ({"x": images(3, 0), "pu": [0, 1]}, "pu has 2 rows, x has 3"),
    ({"x": images(3, 0), "pu": [0, 1, 3]}, "pu holds [3]; allowed values: [0, 1]"),
    ({"x": images(3, 0), "pu": [0, 1, 0], "y": [0, 0, 1]}, "labelled positive in pu but "
                                                           "negative in y"),
    ({"x": images(3, 0), "pu": [0, 1, 0], "y": [0, 1, 2]}, "y holds [2]"),
    ({"x": images(3, 0).astype(np.int16), "pu": [0, 1, 0]},
     "got int16 [3, 1, 8, 8]; allowed: images: uint8"),
    ({"x": np.zeros((3, 1, 9, 9), np.uint8), "pu": [0, 1, 0]}, "[1, 9, 9] per row; the "
                                                               "tracked dataset holds"),
    ({"x": images(0, 0), "pu": []}, "the batch is empty"),
    ({"x": images(3, 0), "pu": [0, 1, 0], "z": [1, 2, 3]}, "unexpected arrays ['z']"),
])
def test_a_bad_batch_is_refused_with_what_is_wrong(arrays, message):
    arrays = {k: np.asarray(v) for k, v in arrays.items()}
    with pytest.raises(DataError) as info:
        check_batch(arrays, "b.npz", like=images(2, 5))
    assert message in str(info.value) and "\n" not in str(info.value)


def test_the_batch_contract_refuses_holdout_rows():
    from pucl.validation import suites

    holdout = images(10, 3)
    clean = suites.batch(images(5, 4), np.zeros(5), np.full(5, -1), (1, 8, 8), "uint8",
                         holdout)
    leaked = suites.batch(np.concatenate([images(5, 4), holdout[2:3]]), np.zeros(6),
                          np.full(6, -1), (1, 8, 8), "uint8", holdout)
    assert clean.success and not leaked.success
    assert "rows also in the frozen holdout" in leaked.one_line()


def test_the_version_digest_follows_the_data_only(tmp_path):
    write_dataset(tmp_path, [Batch(images(4, 0), np.array([1, 0, 0, 0]), np.full(4, -1))],
                  images(2, 1), np.array([0, 1]))
    first = datastore.content_digest(tmp_path)
    (tmp_path / "README.md").write_text("notes")  # not data
    assert datastore.content_digest(tmp_path) == first
    np.savez(tmp_path / "batches" / "00001.npz", x=images(1, 9), pu=[0], y=[-1])
    assert datastore.content_digest(tmp_path) != first


def test_take_rows_splits_without_loss_or_overlap():
    batch = Batch(images(10, 0), np.arange(10) % 2, np.arange(10) % 2)
    first, rest = datastore.take_rows(batch, 4, seed=0)
    both = np.concatenate([first.x, rest.x]).reshape(10, -1)
    assert len(first.x) == 4 and len(rest.x) == 6
    assert sorted(map(bytes, both)) == sorted(map(bytes, batch.x.reshape(10, -1)))
    assert datastore.take_rows(batch, None, 0) == (batch, None)


def test_a_held_lock_refuses_at_once(tmp_path):
    from filelock import FileLock

    with (FileLock(tmp_path / "x.lock"),
          pytest.raises(datastore.LockedError, match="another retrain is running"),
          datastore.exclusive(tmp_path / "x.lock", "retrain", timeout=0)):
        pass
    with datastore.exclusive(tmp_path / "x.lock", "retrain", timeout=0):  # free again
        pass


@pytest.mark.parametrize("challenger,champion,margin,promote", [
    (0.9, None, 0.0, True), (0.9, 0.8, 0.0, True), (0.8, 0.8, 0.0, False),
    (0.85, 0.8, 0.05, False), (0.86, 0.8, 0.05, True), (0.7, 0.8, 0.0, False)])
def test_the_margin_rule(challenger, champion, margin, promote):
    assert should_promote(challenger, champion, margin) is promote


def test_the_fingerprint_ignores_where_outputs_go_but_not_what_shapes_the_model(tmp_path):
    base = Params()
    moved = base.model_copy(update={"tracking": base.tracking.model_copy(
        update={"experiment": "other", "min_improvement": 0.1}), "paths": base.paths.model_copy(
        update={"runs": "elsewhere"})})
    changed = base.model_copy(update={"pretrain": base.pretrain.model_copy(
        update={"temperature": 0.3})})
    assert params_digest(moved) == params_digest(base) != params_digest(changed)
    assert fingerprint(base, tmp_path)["all"] == fingerprint(moved, tmp_path)["all"]


@pytest.mark.parametrize("reference,parsed", [
    ("m", ("m", "champion", None)), ("m@staging", ("m", "staging", None)),
    ("m/3", ("m", None, "3"))])
def test_model_references(reference, parsed):
    assert tracking.parse_reference(reference) == parsed


def test_a_malformed_model_reference_is_one_line():
    with pytest.raises(tracking.ModelNotFound, match="is not NAME, NAME@ALIAS"):
        tracking.parse_reference("m@a@b")


def test_inputs_from_npz_and_folders(tmp_path):
    from PIL import Image

    x = images(3, 0)
    np.savez(tmp_path / "in.npz", x=x)
    read = serving.read_inputs(tmp_path / "in.npz")
    assert read.ids == ["0", "1", "2"] and read.x.dtype == np.float32
    np.testing.assert_allclose(read.x, x / 255.0, rtol=1e-6)
    (tmp_path / "imgs" / "sub").mkdir(parents=True)
    for i, name in enumerate(["b.png", "a.png", "sub/c.png"]):
        Image.fromarray(x[i, 0]).save(tmp_path / "imgs" / name)
    folder = serving.read_inputs(tmp_path / "imgs")
    assert folder.ids == ["a.png", "b.png", "sub/c.png"]
    np.testing.assert_allclose(folder.x[1], x[0] / 255.0, rtol=1e-6)
    (tmp_path / "none").mkdir()
    for bad, message in [(tmp_path / "none", "holds no image"),
                         (tmp_path / "missing.npz", "does not exist")]:
        with pytest.raises(PuclError, match=message):
            serving.read_inputs(bad)
    with pytest.raises(PuclError, match="allowed: .csv, .parquet"):
        serving.check_output(tmp_path / "out.json")


def test_scores_match_the_model_and_labels_follow_the_threshold():
    class Half:  # a pyfunc-like model: P(y=1|x) = mean pixel
        metadata = type("M", (), {"get_input_schema": staticmethod(lambda: None)})

        def predict(self, x):
            return x.reshape(len(x), -1).mean(axis=1)

    x = np.random.default_rng(0).random((1300, 1, 2, 2)).astype(np.float32)
    scores = serving.score(Half(), x)  # three batches of 512
    np.testing.assert_allclose(scores, x.reshape(1300, -1).mean(axis=1), rtol=1e-6)
    assert (serving.labels(scores, 0.5) == (scores >= 0.5)).all()


def test_relative_paths_typed_on_the_command_line_follow_the_current_directory(tmp_path):
    here = tmp_path / "somewhere"
    assert anchor_paths({"data.path": "my.npz", "paths.runs": "/abs", "split.n_p": 5},
                        here) == {"data.path": str(here / "my.npz"), "paths.runs": "/abs",
                                  "split.n_p": 5}


def test_pucl_check_finds_a_relative_data_path_from_a_subdirectory(tmp_path):
    """The reported bug: a relative data.path was looked for inside the run directory."""
    root = make_project(tmp_path / "proj")
    sub = root / "incoming"
    sub.mkdir()
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (60, 1, 28, 28), dtype=np.uint8)
    np.savez(sub / "mine.npz", x=x, pu=(np.arange(60) < 10).astype(int),
             y=np.r_[np.ones(10), rng.integers(0, 2, 50)].astype(int))
    # in this process (the command's own start is test_cli's): the project is found from
    # the working directory alone
    env = {"PUCL_ROOT": None, "HOME": str(tmp_path), "PUCL_TRACKING": "off"}
    result = pucl_cli(sub, "check", "--set", "split.val_fraction=0", "--set",
                      "data.dataset=npz", "--set", "data.task=given", "--set",
                      "data.path=mine.npz", env=env)
    assert result.returncode == 0, result.stderr


def test_a_pu_holdout_keeps_its_priors_half_width_and_reads_without_one(tmp_path):
    """Frozen since the half-width joined the format, a PU holdout carries it and the
    retrain's intervals cover it where it exceeds evaluate.prior_error; one frozen before
    reads as it did, with none, and a half-width outside [0, 1) is refused."""
    from pucl.data.tracked import Holdout, read_holdout
    from pucl.flows.retrain import holdout_prior_error

    x, pu = images(6, 0), np.array([1, 1, 0, 0, 0, 0])
    y = np.where(pu == 1, 1, -1)
    params = Params()
    for halfwidth, allowed in ((0.07, 0.07), (0.01, params.evaluate.prior_error),
                               (None, params.evaluate.prior_error)):
        np.savez(tmp_path / "holdout.npz",
                 **Holdout(x, y, pu, 0.4, halfwidth).arrays())
        read = read_holdout(tmp_path)
        assert (read.prior, read.prior_halfwidth) == (0.4, halfwidth)
        assert holdout_prior_error(params, read) == allowed
    arrays = dict(np.load(tmp_path / "holdout.npz"))
    np.savez(tmp_path / "holdout.npz", **arrays, prior_halfwidth=np.float64(1.5))
    with pytest.raises(DataError, match=r"prior_halfwidth = 1.5 must be in \[0, 1\)"):
        read_holdout(tmp_path)
