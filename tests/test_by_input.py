"""The settings left at auto that the kind of input decides (pucl.recipe.by_input)."""

from __future__ import annotations

import pytest

from pucl.recipe import Recipe
from pucl.recipe.by_input import for_inputs


@pytest.mark.parametrize("shape, loss, pretrain_epochs, objective, epochs, decay", [
    ((12,), "sscl", 200, "dist_pu", 60, 5e-3),   # feature rows: the tabular benchmark's choice
    ((28, 28), "pucl", 50, "pupl_ce", 0, 1e-4),  # greyscale images: the paper's recipe
    ((3, 32, 32), "pucl", 50, "pupl_ce", 0, 1e-4),
])
def test_auto_takes_the_recipe_of_the_input_kind(shape, loss, pretrain_epochs, objective,
                                                 epochs, decay):
    recipe = for_inputs(Recipe(), shape)
    assert (recipe.pretrain.loss, recipe.pretrain.epochs, recipe.classifier.objective,
            recipe.classifier.finetune_epochs, recipe.classifier.weight_decay) == \
        (loss, pretrain_epochs, objective, epochs, decay)
    assert for_inputs(recipe, shape) == recipe  # deciding twice changes nothing


@pytest.mark.parametrize("rows, loss, epochs, finetune, decay", [
    (None, "sscl", 200, 60, 5e-3), (3_000, "sscl", 200, 60, 5e-3),
    (50_000, "sscl", 200, 60, 5e-3), (50_001, "pucl", 50, 20, 1e-4),
    (1_000_000, "pucl", 50, 20, 1e-4)])
def test_large_feature_tables_pretrain_and_fine_tune_fewer_epochs(rows, loss, epochs,
                                                                  finetune, decay):
    # ... and keep the loss and the weight decay measured at that size
    decided = for_inputs(Recipe(), (32,), rows)
    assert (decided.pretrain.loss, decided.pretrain.epochs,
            decided.classifier.finetune_epochs, decided.classifier.weight_decay) == \
        (loss, epochs, finetune, decay)
    assert for_inputs(Recipe(), (28, 28), rows).pretrain.epochs == 50  # images: always 50
    given = Recipe.from_settings({"pretrain.epochs": 100})
    assert for_inputs(given, (32,), rows).pretrain.epochs == 100  # a given value is kept


def test_a_given_setting_is_kept_whatever_the_input():
    given = Recipe.from_settings({"classifier.objective": "nnpu"})
    decided = for_inputs(given, (12,))
    assert decided.classifier.objective == "nnpu"
    assert decided.classifier.finetune_epochs == 60  # the other one was left at auto
    fixed = Recipe.from_settings({"classifier.finetune_epochs": 3, "pretrain.epochs": 7,
                                  "classifier.weight_decay": 0.0})
    assert for_inputs(fixed, (28, 28)).classifier.finetune_epochs == 3
    assert for_inputs(fixed, (12,)).classifier.weight_decay == 0.0
    assert for_inputs(fixed, (12,)).pretrain.epochs == 7


def test_a_method_that_trains_its_own_classifier_keeps_it():
    recipe = Recipe.from_settings({"pretrain.method": "ncpu"})
    decided = for_inputs(recipe, (12,))
    assert (decided.classifier.objective, decided.classifier.finetune_epochs) == \
        ("method_head", 0)


def test_the_defaults_leave_both_to_the_input():
    # params.yaml's defaults say auto, so one recipe serves images and tables
    assert (Recipe().pretrain.loss, Recipe().pretrain.epochs, Recipe().classifier.objective,
            Recipe().classifier.finetune_epochs) == ("auto", "auto", "auto", "auto")


def test_an_undecided_recipe_is_refused_before_training():
    from pucl.recipe.classifier import classifier_settings

    with pytest.raises(ValueError, match=r"classifier.weight_decay is still 'auto'"):
        classifier_settings(Recipe.from_settings({"classifier.objective": "nnpu",
                                                  "classifier.finetune_epochs": 0}))
    with pytest.raises(ValueError, match=r"classifier.objective is still 'auto'"):
        classifier_settings(Recipe())
    assert classifier_settings(for_inputs(Recipe(), (12,))).head.weight_decay == 5e-3


def test_an_undecided_loss_is_refused_before_pretraining():
    from pucl.recipe.pretraining import contrastive_loss

    with pytest.raises(ValueError, match=r"pretrain.loss is still 'auto'"):
        contrastive_loss(Recipe(), None)
    assert type(contrastive_loss(for_inputs(Recipe(), (12,)), None)).__name__ == \
        type(contrastive_loss(Recipe.from_settings({"pretrain.loss": "sscl"}), None)).__name__
