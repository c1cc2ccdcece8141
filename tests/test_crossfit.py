"""Cross-fitting (split.folds): the folds, and scores that never read their own row."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score

from pucl.classify.objectives import TrainingRows
from pucl.data.split import crossfit_folds, resolve_folds
from pucl.errors import DataError, ParamsError
from pucl.models import ContrastiveModel
from pucl.params.config import parse_params
from pucl.recipe import Recipe
from pucl.recipe.by_input import for_inputs
from pucl.recipe.crossfit import fit_folds, validation_plan


def test_folds_share_each_stratum_evenly_and_follow_the_seed():
    rng = np.random.default_rng(0)
    labelled = np.zeros(1003, bool)
    labelled[rng.choice(1003, 103, replace=False)] = True
    in_u = ~labelled | (rng.random(1003) < 0.5)  # case_control-like: P partly in U
    in_u[:40] &= labelled[:40]  # a few rows in neither
    fold = crossfit_folds(labelled, in_u, 5, seed=3)
    assert set(fold) == set(range(5))
    strata = [labelled, ~labelled & in_u, ~labelled & ~in_u]
    for stratum in strata:
        counts = np.bincount(fold[stratum], minlength=5)
        assert counts.max() - counts.min() <= 1, counts
    assert np.array_equal(fold, crossfit_folds(labelled, in_u, 5, seed=3))
    assert not np.array_equal(fold, crossfit_folds(labelled, in_u, 5, seed=4))


@pytest.mark.parametrize("folds", [1, 4])
def test_folds_refuse_a_fold_without_a_labelled_positive(folds):
    labelled = np.array([True, True, True, False, False, False])
    with pytest.raises(DataError, match=f"split.folds = {folds} .*allowed: 2 to 3"):
        crossfit_folds(labelled, ~labelled, folds, seed=0)


@pytest.mark.parametrize("overrides, message", [
    ({"folds": 1}, "split.folds = 1 leaves no row out"),
    ({"folds": 5, "val_fraction": 0.2}, "split.val_fraction = 0.2 would hold rows out"),
])
def test_params_refuse_folds_that_cannot_work(overrides, message):
    with pytest.raises(ParamsError, match=message):
        parse_params({"split": overrides})


def blobs(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    y = (rng.random(n) < 0.5).astype(np.int64)
    x = rng.normal(size=(n, 4)).astype(np.float32) + 2.0 * y[:, None]
    return x, y


def scores_of(labelled: np.ndarray, x: np.ndarray, fold: np.ndarray, objective: str,
              finetune: int, model: ContrastiveModel) -> np.ndarray:
    # the settings left at auto decided for these rows, as the stage and the estimator do
    recipe = for_inputs(Recipe.from_settings(
        {"classifier.objective": objective, "classifier.epochs": 5,
         "classifier.finetune_epochs": finetune, "classifier.batch_size": 64}, seed=0),
        x.shape[1:], len(x))
    rows = TrainingRows(np.arange(len(x)), labelled, np.ones(len(x), bool),
                        labelled.astype(np.int64) if objective == "pupl_ce" else None)
    return fit_folds(recipe, [model], x, rows, fold, 0.5, torch.device("cpu")).scores


@pytest.mark.parametrize("objective, finetune", [("nnpu", 0), ("nnpu", 2), ("pupl_ce", 0)])
def test_a_rows_score_does_not_read_its_own_label(objective, finetune):
    """The fold's classifier never saw its rows: relabelling a row of fold 0 changes no
    score of fold 0 (it does change the other folds' classifiers), and the pretrained
    model the folds start from is left as it was."""
    rng = np.random.default_rng(0)
    x, y = blobs(400, rng)
    labelled = (y == 1) & (rng.random(400) < 0.4)
    fold = crossfit_folds(labelled, np.ones(400, bool), 4, seed=0)
    torch.manual_seed(0)
    model = ContrastiveModel("mlp", (4,), 16, 8)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    scores = scores_of(labelled, x, fold, objective, finetune, model)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert np.isfinite(scores).all()
    flipped = labelled.copy()
    flipped[np.flatnonzero((fold == 0) & labelled)[:10]] = False
    again = scores_of(flipped, x, fold, objective, finetune, model)
    assert np.array_equal(scores[fold == 0], again[fold == 0])
    assert not np.array_equal(scores[fold != 0], again[fold != 0])
    if not finetune:  # and a frozen head's out-of-fold scores rank the classes
        assert roc_auc_score(y, scores) > 0.8


def test_rows_in_no_fold_are_never_left_out_nor_scored():
    rng = np.random.default_rng(1)
    x, y = blobs(200, rng)
    labelled = (y == 1) & (rng.random(200) < 0.5)
    fold = crossfit_folds(labelled, np.ones(200, bool), 2, seed=0)
    fold[:20] = -1
    torch.manual_seed(0)
    scores = scores_of(labelled, x, fold, "nnpu", 0, ContrastiveModel("mlp", (4,), 16, 8))
    assert np.isnan(scores[:20]).all() and np.isfinite(scores[20:]).all()


def test_a_ready_made_classifier_cannot_be_cross_fitted():
    recipe = Recipe.from_settings({"pretrain.method": "ncpu",
                                   "classifier.objective": "method_head"})
    rows = TrainingRows(np.arange(4), np.array([1, 1, 0, 0], bool), np.ones(4, bool))
    with pytest.raises(ParamsError, match="split.folds = 2 .*'method_head' comes ready-made"):
        fit_folds(recipe, [], np.zeros((4, 2), np.float32), rows, np.array([0, 1, 0, 1]),
                  0.5, torch.device("cpu"))


def test_the_pipeline_cross_fits_its_estimates(tmp_path, tracking_uri, monkeypatch):
    """With split.folds the split sets no part aside, the classifier trains on every row,
    and the estimates read every labelled positive and member of U, each scored by the
    fold's classifier (what validation_scores.csv keeps for paired comparisons)."""
    import json

    import pandas as pd

    from tests.conftest import make_project, python_path, tiny_params
    from tests.helpers import STAGES, stage

    root = make_project(tmp_path / "proj", tiny_params(  # auto: 5 folds on 4,000 rows, U
        # a draw of 1,000 of them (TINY_PARAMS), every labelled positive kept
        split={"n_p": 200, "folds": "auto"}, classifier={"epochs": 3, "objective": "nnpu"}))
    monkeypatch.setenv("PUCL_ROOT", str(root))
    monkeypatch.setenv("PATH", python_path())
    for name in STAGES:
        stage(root, name)
    manifest = pd.read_parquet(root / "data/split/manifest.parquet")
    train = manifest[manifest["split"] == "train"]
    assert "val" not in set(manifest["split"]) and train["in_u"].sum() == 1000
    assert train["pu"].sum() == 200  # every labelled positive, inside U or not
    assert sorted(train["fold"].unique()) == [0, 1, 2, 3, 4]
    assert json.loads((root / "data/split/summary.json").read_text())["folds"] == 5
    assert (manifest.loc[manifest["split"] == "test", "fold"] == -1).all()
    oof = pd.read_parquet(root / "data/classifier/crossfit_scores.parquet")
    assert oof["index"].tolist() == train["index"].tolist() and oof["score"].notna().all()
    metrics = json.loads((root / "data/evaluate/metrics.json").read_text())
    assert metrics["val_folds"] == 5
    assert (metrics["val_n_p"], metrics["val_n_u"]) == (200, 1000)  # every row read
    kept = pd.read_csv(root / "data/evaluate/validation_scores.csv")
    assert np.allclose(kept["score"], oof["score"])
    p = kept["score"][kept["pu"] == 1]
    assert metrics["val_tpr"] == pytest.approx(float((p >= 0.5).mean()))
    ensemble_ships_the_fold_classifiers(root, oof, metrics)


def ensemble_ships_the_fold_classifiers(root, oof, refit_metrics) -> None:
    """classifier.shipped: ensemble on the same run: the shipped members are the folds'
    classifiers themselves (member k scores fold k's rows exactly as the out-of-fold
    scores did, after a save and load), and the estimates are unchanged."""
    import json

    import pandas as pd
    import yaml

    from pucl.artifacts.models import load_classifier, load_models
    from pucl.params.dataset import dataset_of
    from pucl.recipe.scoring import member_scores, view_features
    from tests.helpers import stage

    params = yaml.safe_load((root / "params.yaml").read_text())
    params["classifier"]["shipped"] = "ensemble"
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    for name in ("train_classifier", "evaluate"):
        stage(root, name)
    assert json.loads((root / "data/classifier/summary.json").read_text())["shipped"] == \
        "ensemble"
    again = pd.read_parquet(root / "data/classifier/crossfit_scores.parquet")
    assert np.array_equal(again["score"], oof["score"])
    members = load_classifier(root / "data/classifier/head.pt",
                              load_models(root / "data/pretrain/model.pt"))
    assert len(members) == 5
    recipe = Recipe.of(parse_params(params))
    x = dataset_of(parse_params(params), root).x_train
    for k, member in enumerate(members):
        rows = oof.loc[oof["fold"] == k].head(50)
        features = view_features(recipe, [member], x[rows["index"].to_numpy()],
                                 "encoder", torch.device("cpu"))
        scores = member_scores([member[1]], features).mean(axis=(0, 1))
        assert np.allclose(scores, rows["score"], atol=1e-5)
    metrics = json.loads((root / "data/evaluate/metrics.json").read_text())
    estimates = [key for key in refit_metrics if key.startswith("val_est")]
    assert estimates and all(metrics[k] == refit_metrics[k] for k in estimates)


def test_a_cross_fitted_retrain_needs_no_validation_share():
    """Retraining on tracked rows with split.folds holds no part out, so 30 labelled
    positives (too few for any part) keep params' own setting, `auto` folds included;
    without folds, refused."""
    from pucl.production.datastore import validation_fraction_for

    pu = np.r_[np.ones(30), np.zeros(270)].astype(np.int64)
    for folds in (5, "auto"):
        params = parse_params({"split": {"folds": folds}})
        assert validation_fraction_for(params, pu, (4,), False) == "auto"
    with pytest.raises(DataError, match="too few for a validation part"):
        validation_fraction_for(parse_params({"split": {"folds": 0}}), pu, (4,), False)


@pytest.mark.parametrize("setting, fraction, rows, labelled, refits, folds", [
    ("auto", "auto", 4_000, 1_000, True, 5),     # the embedded default run
    ("auto", "auto", 20_000, 20, True, 5),       # at both bounds
    ("auto", "auto", 20_001, 1_000, True, 0),    # F-MNIST's size: a validation part
    ("auto", "auto", 4_000, 19, True, 0),        # too few labelled positives to read
    ("auto", 0.2, 4_000, 1_000, True, 0),        # a share asked for by number
    ("auto", 0.0, 4_000, 1_000, True, 0),        # validation off
    ("auto", "auto", 4_000, 1_000, False, 0),    # a head the folds cannot refit
    (3, 0.0, 50_000, 10, False, 3),              # a number is itself
    (0, "auto", 4_000, 1_000, True, 0),
])
def test_auto_folds_cross_fit_small_data_only(setting, fraction, rows, labelled, refits,
                                               folds):
    assert resolve_folds(setting, fraction, rows, labelled, refits) == folds


def test_auto_folds_skip_a_ready_made_head():
    """A method whose pretraining makes the classifier (NcPU's head) has nothing for the
    folds to refit: `auto` gives it the validation part, which the default run's recipe
    does not get."""
    split = parse_params({}).split
    ncpu = Recipe.from_settings({"pretrain.method": "ncpu"})
    assert validation_plan(split, ncpu, (1, 28, 28), 4_000, 1_000) == (0, "auto")
    assert validation_plan(split, Recipe(), (1, 28, 28), 4_000, 1_000) == (5, 0.0)
