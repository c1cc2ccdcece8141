"""One recipe: a preset's variant run through the six stages and the same variant as a
scikit-learn estimator (PUClassifier.from_preset), fit on the split's training rows with
the same seed, are the same model. Also how a preset's settings become the estimator's
parameters."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml
from sklearn.metrics import roc_auc_score

from pucl import PUClassifier
from pucl.data import load_dataset
from pucl.params.config import Params
from pucl.recipe.settings import apply_overrides, flatten
from tests.conftest import ROOT, TINY_PARAMS, make_project
from tests.helpers import STAGES, read_metrics, stage

# Tiny settings of the method (the data's stay out of an estimator), and a variant that
# takes every branch of the recipe the default takes and more: PUPL's pseudo-labels, a
# head on the trunk fine-tuned one epoch and smoothed, each test image scored at 9
# positions. Mirror views, several encoders and the PU risks' rows have tests of their
# own on both sides (test_estimators, test_members, test_objectives).
METHOD = {**flatten({s: TINY_PARAMS[s] for s in ("prior", "pretrain", "pupl", "classifier")}),
          "evaluate.tta_shift": TINY_PARAMS["evaluate"]["tta_shift"]}
VARIANT = {"classifier.features": "trunk", "classifier.finetune_epochs": 1,
           "classifier.neighbours": 5, "evaluate.tta_shift": 1,
           "pretrain.augment.hflip": 0.5, "prior.heldout.folds": 3}


def test_the_estimator_of_a_preset_is_the_pipelines_model(tmp_path, tracking_uri,
                                                         monkeypatch):
    variant = VARIANT
    preset = tmp_path / "tiny.yaml"
    preset.write_text(yaml.safe_dump({"name": "tiny", "set": METHOD,
                                      "variants": {"v": variant}, "default": "v"}))
    raw = apply_overrides(yaml.safe_load((ROOT / "params.yaml").read_text()),
                          # U uncapped: the estimator reads every row it is given
                          {**flatten(TINY_PARAMS), "split.max_unlabeled": None, **METHOD,
                           **variant})
    project = make_project(tmp_path / "proj", raw)
    monkeypatch.setenv("PUCL_ROOT", str(project))
    for name in STAGES:
        stage(project, name)
    metrics = read_metrics(project)

    params = Params.model_validate(raw)
    manifest = pd.read_parquet(project / "data/split/manifest.parquet")
    train, test = manifest[manifest["split"] == "train"], manifest[manifest["split"] == "test"]
    data = load_dataset("mnist5k", test_fraction=params.data.test_fraction,
                        seed=params.data.seed)
    clf = PUClassifier.from_preset(preset, random_state=params.base.seed, device="cpu")
    clf.fit(data.x_train[train["index"].to_numpy()], train["pu"].to_numpy())
    x_test, y_test = data.x_test[test["index"].to_numpy()], test["y"].to_numpy()
    assert clf.prior_ == metrics["prior_estimate"]
    assert clf.score(x_test, y_test) == metrics["accuracy"]
    assert roc_auc_score(y_test, clf.predict_proba(x_test)[:, 1]) == pytest.approx(
        metrics["roc_auc"], abs=1e-12)


def test_a_presets_settings_become_the_estimators_parameters(tmp_path):
    preset = tmp_path / "p.yaml"
    preset.write_text(yaml.safe_dump({
        "name": "p", "default": "b",
        "set": {"data.dataset": "fmnist", "split.n_p": 1000, "pretrain.epochs": 7,
                "pretrain.augment.hflip": 0.5, "evaluate.tta_shift": 0,
                "prior.heldout.folds": 5, "evaluate.knn_k": 3},
        "variants": {"a": {"prior.method": "km2"},
                     "b": {"classifier.objective": "nnpu", "classifier.finetune_epochs": 30,
                           "evaluate.tta": "hflip", "pupl.method": "pu_kmeans",
                           "split.scenario": "single_dataset"}}}))
    clf = PUClassifier.from_preset(preset, random_state=3)
    assert (clf.epochs, clf.objective, clf.finetune_epochs, clf.mirror, clf.shift,
            clf.scenario, clf.random_state) == (7, "nnpu", 30, True, 0, "single_dataset", 3)
    assert clf.augment == {"hflip": 0.5}
    assert clf.settings == {"prior.heldout.folds": 5, "pupl.method": "pu_kmeans"}
    assert PUClassifier.from_preset(preset, "a").prior == "km2"
    recipe = clf._recipe()  # what fit builds: every setting where the pipeline has it
    assert (recipe.pretrain.augment.hflip, recipe.prior.sub_section("heldout"),
            recipe.evaluate.tta, recipe.seed) == (0.5, {"folds": 5}, "hflip", 3)
    with pytest.raises(ValueError, match="unknown preset 'nope' \\(allowed: cifar, "):
        PUClassifier.from_preset("nope")


def test_the_shipped_presets_recommended_variants_become_estimators():
    i = PUClassifier.from_preset("fmnist-i")
    assert (i.objective, i.finetune_epochs, i.finetune_lr, i.mirror, i.shift) == \
        ("dist_pu_pairs", 30, 0.001, True, 2)
    ii = PUClassifier.from_preset("fmnist-ii")
    assert (ii.members, ii.epochs, ii.features, ii.neighbours, ii.head_epochs) == \
        (2, 15, "trunk", 10, 20)


def test_the_estimators_defaults_are_params_yamls():
    """One home: PUClassifier() builds the recipe of the shipped params.yaml."""
    from pucl.params.config import load_params
    from pucl.recipe import Recipe

    params = load_params(ROOT / "params.yaml")
    assert PUClassifier()._recipe() == Recipe.of(params)
    assert PUClassifier().get_params()["scenario"] == params.split.scenario
    assert np.isclose(PUClassifier().lr, params.pretrain.lr)
