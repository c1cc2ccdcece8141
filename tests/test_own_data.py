"""Bring-your-own data: the `npz` and `folder` loaders, and both through every stage."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pucl.data import load_dataset
from pucl.errors import DataError
from pucl.prior import PRIOR_ESTIMATORS
from tests.conftest import make_project, tiny_params
from tests.helpers import STAGES, read_metrics, stage


def blobs(n: int, prior: float, rng: np.random.Generator, dim: int = 8):
    """Two Gaussian classes 4 standard deviations apart (Bayes accuracy about 0.98), on
    feature scales that differ by a factor 1,000 (the MLP must standardise them)."""
    y = (rng.random(n) < prior).astype(np.int64)
    x = rng.normal(size=(n, dim)) + np.where(y[:, None] == 1, 4.0 / np.sqrt(dim), 0.0)
    return (x * np.logspace(-1, 2, dim)).astype(np.float64), y


def tabular_npz(path, rng, with_y: bool = False, with_test: bool = True):
    x, y = blobs(1500, 0.4, rng)
    pu = np.zeros(len(y), np.int64)
    pu[rng.choice(np.flatnonzero(y == 1), size=150, replace=False)] = 1
    arrays = {"x": x, "pu": pu}
    if with_y:
        arrays["y"] = y
    if with_test:
        arrays["x_test"], arrays["y_test"] = blobs(400, 0.4, rng)
    np.savez(path, **arrays)
    return x, y, pu


def test_npz_tabular_keeps_rows_and_marks_unknown_labels(tmp_path):
    x, _, pu = tabular_npz(tmp_path / "d.npz", np.random.default_rng(0))
    data = load_dataset("npz", path=str(tmp_path / "d.npz"))
    assert data.is_tabular and data.x_train.dtype == np.float32
    np.testing.assert_allclose(data.x_train, x.astype(np.float32))
    np.testing.assert_array_equal(data.pu_train, pu == 1)
    # labelled positives are known positives; every other training label is unknown
    np.testing.assert_array_equal(data.y_train, np.where(pu == 1, 1, -1))
    assert set(np.unique(data.y_test)) == {0, 1}


def test_npz_images_without_test_hold_out_labelled_unlabeled_rows(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.integers(0, 256, size=(300, 12, 12), dtype=np.uint8)
    y = np.r_[np.ones(120, np.int64), np.zeros(180, np.int64)]
    pu = np.zeros(300, np.int64)
    pu[:40] = 1
    np.savez(tmp_path / "img.npz", x=x, pu=pu, y=y)
    data = load_dataset("npz", path=str(tmp_path / "img.npz"), test_fraction=0.25, seed=3)
    assert data.x_train.shape[1:] == (1, 12, 12)
    assert len(data.x_train) + len(data.x_test) == 300
    assert len(data.x_test) == 65  # a quarter of the 260 unlabeled rows
    assert data.pu_train.sum() == 40  # no labelled positive is held out
    # the held-out rows are exactly the images missing from training
    train_rows = {r.tobytes() for r in data.x_train}
    assert not any(r.tobytes() in train_rows for r in data.x_test)
    again = load_dataset("npz", path=str(tmp_path / "img.npz"), test_fraction=0.25, seed=3)
    np.testing.assert_array_equal(again.x_test, data.x_test)


@pytest.mark.parametrize("change, message", [
    ({"pu": np.full(50, 2)}, "pu holds [2]; allowed values: [0, 1]"),
    ({"pu": np.zeros(50, np.int64)}, "pu marks no labelled positive"),
    ({"pu": np.ones(50, np.int64)}, "pu labels every row"),
    ({"pu": np.r_[1, np.zeros(48, np.int64)]}, "pu has 49 rows, x has 50"),
    ({"x": np.zeros((50, 2, 2, 2, 2))}, "got float64 [50, 2, 2, 2, 2]; allowed: images"),
    ({"x": np.zeros((50, 8, 8, 3), np.uint8)}, "look channels-last"),
    ({"x": np.full((50, 8, 8), 2.0)}, "float images must hold pixels in [0, 1]"),
    ({"x": np.full((50, 3), np.nan)}, "features hold NaN"),
    ({"y_test": None}, "give both x_test and y_test, or neither"),
    ({"y": np.r_[0, np.ones(49, np.int64)]}, "labelled positive in pu but negative in y"),
])
def test_npz_bad_arrays_are_named(tmp_path, change, message):
    arrays = {"x": np.random.default_rng(0).normal(size=(50, 3)),
              "pu": np.r_[1, np.zeros(49, np.int64)],
              "x_test": np.zeros((10, 3)), "y_test": np.r_[0, 1, np.zeros(8, np.int64)]}
    arrays.update(change)
    np.savez(tmp_path / "bad.npz", **{k: v for k, v in arrays.items() if v is not None})
    with pytest.raises(DataError, match="^.*" + message.replace("[", r"\[").replace("]", r"\]")):
        load_dataset("npz", path=str(tmp_path / "bad.npz"))


def test_npz_missing_key_and_missing_path(tmp_path):
    np.savez(tmp_path / "nox.npz", pu=np.ones(3))
    with pytest.raises(DataError, match=r"has no array 'x' \(has \['pu'\]"):
        load_dataset("npz", path=str(tmp_path / "nox.npz"))
    with pytest.raises(DataError, match="reads data.path, which is not set"):
        load_dataset("npz", path=None)
    with pytest.raises(DataError, match="does not exist"):
        load_dataset("npz", path=str(tmp_path / "absent.npz"))


def write_folder(root, rng, n_pos=30, n_unl=90, size=(16, 16), colour=False):
    from PIL import Image

    def save(directory, n, bright):
        directory.mkdir(parents=True, exist_ok=True)
        for i in range(n):
            base = rng.integers(0, 60, size=(size[1], size[0], 3 if colour else 1))
            pixels = np.clip(base + (150 if bright else 0), 0, 255).astype(np.uint8)
            image = Image.fromarray(pixels if colour else pixels[..., 0])
            image.save(directory / f"{i:03d}.png")

    save(root / "positive", n_pos, True)
    unl = root / "unlabeled"
    save(unl / "a", n_unl // 2, True)  # nested directories are read too
    save(unl / "b", n_unl - n_unl // 2, False)
    save(root / "test" / "positive", 20, True)
    save(root / "test" / "negative", 25, False)


def test_folder_reads_layout_into_pu_split(tmp_path):
    write_folder(tmp_path / "imgs", np.random.default_rng(0), colour=True)
    data = load_dataset("folder", path=str(tmp_path / "imgs"))
    assert data.x_train.shape == (120, 3, 16, 16) and data.x_test.shape == (45, 3, 16, 16)
    assert data.pu_train.sum() == 30 and data.pu_train[:30].all()
    assert (data.y_train[30:] == -1).all()
    np.testing.assert_array_equal(data.y_test, np.r_[np.ones(20), np.zeros(25)])
    # bright images are the positives
    assert data.x_train[:30].mean() > 150 > data.x_train[75:].mean()


def test_folder_errors_name_the_offending_file_or_directory(tmp_path):
    from PIL import Image

    write_folder(tmp_path / "imgs", np.random.default_rng(0))
    Image.fromarray(np.zeros((9, 8), np.uint8)).save(tmp_path / "imgs/positive/odd.png")
    with pytest.raises(DataError, match=r"odd.png is 8x9 \(resize first\)"):
        load_dataset("folder", path=str(tmp_path / "imgs"))
    (tmp_path / "empty" / "positive").mkdir(parents=True)
    with pytest.raises(DataError, match="positive holds no image"):
        load_dataset("folder", path=str(tmp_path / "empty"))


def run_all_stages(project):
    for name in STAGES:
        stage(project, name)
    return read_metrics(project)


def test_tabular_npz_without_u_labels_runs_every_stage(tmp_path, tracking_uri, monkeypatch):
    """With the default pretrain.encoder (auto: the MLP for feature rows)."""
    params = tiny_params(data={"dataset": "npz", "task": "given", "path": "own.npz"},
                         pretrain={"epochs": 5, "batch_size": 128},
                         split={"val_fraction": 0.14},  # 21 of the 150 labelled positives
                         classifier={"epochs": 20})
    project = make_project(tmp_path / "proj", params)
    monkeypatch.setenv("PUCL_ROOT", str(project))
    _, y, _ = tabular_npz(project / "own.npz", np.random.default_rng(0))
    metrics = run_all_stages(project)
    # Separable classes: the pipeline must learn them without a single U label.
    assert metrics["accuracy"] >= 0.9, metrics
    prior = json.loads((project / "data/prior/prior.json").read_text())
    assert prior["prior_true"] is None and abs(prior["prior"] - y.mean()) < 0.1, prior
    # diagnostics that need U's labels are left out, not made up
    assert "pseudo_label_accuracy" not in metrics and "prior_true" not in metrics
    split = json.loads((project / "data/split/summary.json").read_text())
    assert split["n_p"] + split["n_val_p"] == 150 and split["n_val_p"] == 21
    assert split["prior_u_true"] is None and split["prior_val_true"] is None
    # the label-free estimate needs no label of U; its oracle check does, so is left out
    assert metrics["val_est_accuracy_low"] <= metrics["val_est_accuracy"] \
        <= metrics["val_est_accuracy_high"] and metrics["val_est_accuracy"] >= 0.85
    assert not [k for k in metrics if k.startswith("val_true_")]


def test_retraining_on_p_and_u_alone_names_the_tracked_dataset(tmp_path):
    """An npz without test rows has nothing labelled to score champion and challenger on:
    retrain's holdout says so in one line (a tracked dataset freezes a PU holdout)."""
    from pucl.errors import DataError
    from pucl.flows.retrain import holdout
    from pucl.stages.runner import resolve_params

    params = tiny_params(data={"dataset": "npz", "task": "given", "path": "own.npz"},
                         pretrain={"encoder": "mlp"})
    project = make_project(tmp_path / "proj", params)
    tabular_npz(project / "own.npz", np.random.default_rng(0), with_test=False)
    with pytest.raises(DataError, match=r"^data.dataset = 'npz' has no labelled test rows .*"
                                        r"data.dataset: tracked"):
        holdout(resolve_params(project, {}), project)


def test_mirror_views_of_feature_rows_are_refused_before_any_stage(tmp_path):
    from pucl.errors import ParamsError
    from pucl.stages.preflight import check_inputs
    from pucl.stages.runner import resolve_params

    params = tiny_params(data={"dataset": "npz", "task": "given", "path": "own.npz"},
                         pretrain={"encoder": "mlp"}, evaluate={"tta": "hflip"})
    project = make_project(tmp_path / "proj", params)
    tabular_npz(project / "own.npz", np.random.default_rng(0))
    with pytest.raises(ParamsError, match=r"^evaluate.tta = 'hflip' mirrors images, but npz "
                                          r"rows have shape \[8\] \(allowed for feature "
                                          r"rows: none\)$"):
        check_inputs(resolve_params(project, {}), project)
    assert not (project / "data" / "split").exists()


def test_image_folder_runs_every_stage(tmp_path, tracking_uri, monkeypatch):
    params = tiny_params(data={"dataset": "folder", "task": "given", "path": "imgs"},
                         split={"val_fraction": 0.0},  # 30 labelled images
                         pretrain={"encoder": "lenet5", "epochs": 2, "batch_size": 64},
                         prior={"method": "given", "value": 0.5})
    project = make_project(tmp_path / "proj", params)
    monkeypatch.setenv("PUCL_ROOT", str(project))
    write_folder(project / "imgs", np.random.default_rng(0), size=(28, 28))
    metrics = run_all_stages(project)
    assert metrics["accuracy"] >= 0.9, metrics  # bright vs dark


def test_oracle_prior_on_unlabelled_u_is_refused(tmp_path, tracking_uri, monkeypatch):
    params = tiny_params(data={"dataset": "npz", "task": "given", "path": "own.npz"},
                         split={"val_fraction": 0.0}, prior={"method": "oracle"})
    project = make_project(tmp_path / "proj", params)
    monkeypatch.setenv("PUCL_ROOT", str(project))
    tabular_npz(project / "own.npz", np.random.default_rng(0))
    stage(project, "build_split")
    result = stage(project, "estimate_prior", check=False)
    assert result.returncode != 0
    assert result.stderr.strip().splitlines()[-1].endswith(
        "prior.method = 'oracle' needs the true labels of U, which this data does not have "
        f"(allowed here: {', '.join(PRIOR_ESTIMATORS.names())}, given)")
    assert not (project / "data/prior/prior.json").exists()


def test_p_and_u_alone_run_every_stage_judged_by_the_validation_estimate(
        tmp_path, tracking_uri, monkeypatch):
    """An npz with `x` and `pu` only: no y, no test split. The validation part's
    label-free estimates are the metrics, and the declared files are drawn from it."""
    import pandas as pd

    params = tiny_params(data={"dataset": "npz", "task": "given", "path": "own.npz"},
                         pretrain={"epochs": 5, "batch_size": 128},
                         split={"val_fraction": 0.14, "max_unlabeled": None},
                         classifier={"epochs": 20})
    project = make_project(tmp_path / "proj", params)
    monkeypatch.setenv("PUCL_ROOT", str(project))
    tabular_npz(project / "own.npz", np.random.default_rng(0), with_test=False)
    metrics = run_all_stages(project)
    assert metrics["n_test"] == 0 and "accuracy" not in metrics and "knn_accuracy" not in metrics
    assert (metrics["val_n_p"], metrics["val_n_u"]) == (21, 210)
    for name in ("accuracy", "auc", "f1"):  # separable blobs: a good classifier, estimated
        assert metrics[f"val_est_{name}_low"] <= metrics[f"val_est_{name}"] \
            <= metrics[f"val_est_{name}_high"]
    assert metrics["val_est_accuracy"] >= 0.85 and metrics["val_est_auc"] >= 0.9
    out = project / "data/evaluate"
    roc = pd.read_csv(out / "roc.csv")  # held-out P against held-out U
    assert len(roc) > 2 and roc["fpr"].is_monotonic_increasing
    assert pd.read_csv(out / "errors_by_class.csv").empty  # no class is known
    assert all((out / f).stat().st_size > 0 for f in ("roc.png", "embedding.png",
                                                      "errors_by_class.png"))
    # each validation row's score is kept: the estimate, recomputed from them by hand
    rows = pd.read_csv(out / "validation_scores.csv")
    p_scores, u_scores = rows.loc[rows["pu"] == 1, "score"], rows.loc[rows["in_u"], "score"]
    assert (len(p_scores), len(u_scores)) == (metrics["val_n_p"], metrics["val_n_u"])
    prior, tpr, r = metrics["val_prior"], (p_scores >= 0.5).mean(), (u_scores >= 0.5).mean()
    fpr = min(max((r - prior * tpr) / (1 - prior), 0.0), 1.0)
    assert metrics["val_est_accuracy"] == pytest.approx(prior * tpr + (1 - prior) * (1 - fpr))


def test_p_and_u_alone_without_a_validation_part_are_refused_before_any_stage(tmp_path):
    from pucl.errors import ParamsError
    from pucl.stages.preflight import check_inputs
    from pucl.stages.runner import resolve_params

    params = tiny_params(data={"dataset": "npz", "task": "given", "path": "pu.npz"},
                         split={"val_fraction": 0.0})
    project = make_project(tmp_path / "proj", params)
    tabular_npz(project / "pu.npz", np.random.default_rng(0), with_test=False)
    with pytest.raises(ParamsError, match=r"/pu.npz has no labelled test rows, so only the "
                                          r"validation estimates can judge the classifier, "
                                          r"and split.val_fraction = 0 turns them off"):
        check_inputs(resolve_params(project, {}), project)
