"""Settings left at `auto` that depend on the kind of input, decided in one place.

Feature rows `[n, d]` (tabular data) and images `[n, c, h, w]` want different recipes:
on images the paper's recipe (50 epochs of PUCL pretraining, a PUPL cross-entropy head on
a frozen encoder) stays the default; on feature tables 200 epochs of SimCLR pretraining
(which reads no label) and a Dist-PU head fine-tuned with the encoder for 60 epochs, at a
weight decay of 5e-3, won the tabular benchmark's choice from P and U alone
(reports/tabular). Methods that train
their own classifier (pretrain.method ncpu, ssc) take it as their head on any input.

`for_inputs(recipe, in_shape)` gives the recipe with every such `auto` replaced; the
estimator and the train_classifier stage call it with the data's shape, so both build
the same model. The encoder's `auto` (pucl.recipe.pretraining.resolve_encoder) reads the
shape where the model is built.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from pucl.recipe import Recipe

AUTO = "auto"
# What `auto` means for each kind of input, by dotted setting. Feature rows: chosen on the
# tabular benchmark by the label-free estimate (reports/tabular: a Dist-PU head
# fine-tuned 20 epochs in the first round, 100 pretraining epochs in the second, 60
# epochs of fine-tuning in the sixth, by the cross-fitted paired estimate, the nnPU
# network's weight decay of 5e-3 on the head and fine-tuning in the seventh, and SimCLR's
# loss instead of PUCL's in the tenth, with folds that refit the whole recipe, and 200
# epochs of it in the eleventh: +0.48 +- 0.07 points on report seeds 3-22).
RULES: dict[str, dict[str, Any]] = {
    "features": {"pretrain.loss": "sscl", "pretrain.epochs": 200,
                 "classifier.objective": "dist_pu", "classifier.finetune_epochs": 60,
                 "classifier.weight_decay": 5e-3},
    "images": {"pretrain.loss": "pucl", "pretrain.epochs": 50,
               "classifier.objective": "pupl_ce", "classifier.finetune_epochs": 0,
               "classifier.weight_decay": 1e-4},
    "method_head": {"pretrain.loss": "pucl", "pretrain.epochs": 50,
                    "classifier.objective": "method_head", "classifier.finetune_epochs": 0,
                    "classifier.weight_decay": 1e-4},
}
# Feature tables of more rows than this pretrain with PUCL for 50 epochs, not SimCLR for
# 200, fine-tune for 20, not 60, and keep the loss and the weight decay of 1e-4 measured
# there. The longer schedules, the stronger decay and SimCLR were chosen on tables of at
# most 3,000 rows; at
# 1,000,000 rows (136,000 read after split.max_unlabeled) 50 epochs scored 98.80% in 8.0
# minutes a fit and 100 epochs 98.84% in 15.5 (reports/tabular, "Scale"), past the 10
# minutes a million rows may take; 20 epochs of fine-tuning took 178 s of those.
LARGE_TABLE_ROWS = 50_000
LARGE_TABLE = {"pretrain.loss": "pucl", "pretrain.epochs": 50, "classifier.finetune_epochs": 20,
               "classifier.weight_decay": 1e-4}


def input_kind(in_shape: Sequence[int]) -> str:
    """features for rows of numbers [d], images for [h, w] or [c, h, w]."""
    return "features" if len(in_shape) == 1 else "images"


def rule_for(recipe: Recipe, in_shape: Sequence[int]) -> str:
    """The RULES entry for this recipe and input: a method that trains its own classifier
    keeps it; otherwise the input's kind decides."""
    if recipe.pretrain.method != "contrastive":
        return "method_head"
    return input_kind(in_shape)


def for_inputs(recipe: Recipe, in_shape: Sequence[int], n_rows: int | None = None
               ) -> Recipe:
    """`recipe` with its `auto` settings of RULES decided for `n_rows` inputs of `in_shape`
    (one row's shape; n_rows None: a table of at most LARGE_TABLE_ROWS); settings given a
    value keep it. Deciding twice changes nothing."""
    kind = rule_for(recipe, in_shape)
    rules = dict(RULES[kind])
    if kind == "features" and n_rows is not None and n_rows > LARGE_TABLE_ROWS:
        rules.update(LARGE_TABLE)
    sections: dict[str, dict[str, Any]] = {}
    for dotted, value in rules.items():
        section, name = dotted.split(".")
        if getattr(getattr(recipe, section), name) == AUTO:
            sections.setdefault(section, {})[name] = value
    return replace(recipe, **{section: getattr(recipe, section).model_copy(update=chosen)
                              for section, chosen in sections.items()})
