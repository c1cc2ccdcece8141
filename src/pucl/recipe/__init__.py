"""One recipe for a model, from typed settings (pucl.recipe.settings): the steps the six DVC stages
call one at a time, wrapping each with files, data contracts and tracking, and that the
scikit-learn estimator (pucl.estimators) calls in memory. Both sides get the same model
from the same settings, data and seed.

Steps, in pipeline order, one module each (a stage imports only its own, so DVC reruns
it only when its own code changes):
- `prior.estimate_prior`: the class prior of U (prior.method, with its settings);
- `pretraining.pretrain`: one encoder + projection head per seed of `member_seeds`;
- `pupl.pupl_features` and `pupl.fit_pseudo_labels`: PUPL's labels on the projections;
- `classifier.fit_classifiers`: a head per encoder with classifier.objective, fine-tuned
  and smoothed as asked (pucl.classify.fit);
- `scoring.view_features` and `scoring.member_scores`: scores over members and
  test-time views (evaluate.tta, evaluate.tta_shift).
`checks` validates a recipe's registry choices and sub-sections as params.yaml's are;
`by_input.for_inputs` decides the settings left at `auto` by the kind of input (feature
rows or images).

Every step that draws random numbers seeds what it draws from, so a step gives the same
result whether it runs in a stage process of its own or after the others in memory.
Pure: arrays, modules and settings in and out; no files, no tracking.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import BaseModel, ValidationError

from pucl.errors import ParamsError, invalid_settings, unknown_parameter
from pucl.recipe.settings import (
    ClassifierParams,
    EvaluateParams,
    MethodSection,
    PretrainParams,
    PriorParams,
    PuplParams,
    apply_overrides,
    check_method_head,
)
from pucl.registry import Entry


@dataclass(frozen=True)
class Recipe:
    """The method's settings, section by section as in params.yaml, and the seed of every
    random choice (params.yaml's base.seed)."""

    prior: PriorParams = field(default_factory=PriorParams)
    pretrain: PretrainParams = field(default_factory=PretrainParams)
    pupl: PuplParams = field(default_factory=PuplParams)
    classifier: ClassifierParams = field(default_factory=ClassifierParams)
    evaluate: EvaluateParams = field(default_factory=EvaluateParams)
    seed: int = 0

    def __post_init__(self) -> None:
        check_method_head(self.pretrain, self.classifier)

    @classmethod
    def of(cls, params: Any) -> Recipe:
        """The recipe of a pipeline's params (pucl.params.config.Params)."""
        return cls(params.prior, params.pretrain, params.pupl, params.classifier,
                   params.evaluate, params.base.seed)

    @classmethod
    def from_settings(cls, settings: dict[str, Any], seed: int = 0) -> Recipe:
        """A recipe from dotted settings over the defaults ({"pretrain.epochs": 20,
        "prior.heldout.folds": 5}), checked as params.yaml is: one-line ParamsError."""
        return cls.from_dict(apply_overrides({}, settings), seed)

    @classmethod
    def from_dict(cls, raw: dict[str, Any], seed: int = 0) -> Recipe:
        """A recipe from nested sections over the defaults ({"pretrain": {"epochs": 20}};
        `to_dict`'s form), checked as params.yaml is: one-line ParamsError."""
        unknown = sorted(set(raw) - set(SECTIONS))
        if unknown:
            raise ParamsError(unknown_parameter(unknown[0], SECTIONS))
        sections = {name: _validated(model, raw.get(name) or {}, name)
                    for name, model in SECTIONS.items()}
        try:
            recipe = cls(**sections, seed=seed)
        except ValueError as exc:  # a rule across sections
            raise ParamsError(str(exc)) from None
        from pucl.recipe.checks import check_methods  # every registry: not for the stages

        check_methods(recipe)
        return recipe

    def to_dict(self) -> dict[str, Any]:
        """Every section as plain values (JSON's types), for `from_dict`."""
        return {name: getattr(self, name).model_dump(mode="json") for name in SECTIONS}


def _validated(model: type[BaseModel], raw: Any, name: str) -> BaseModel:
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise invalid_settings(exc, model, name) from None


SECTIONS: dict[str, type[BaseModel]] = {
    "prior": PriorParams, "pretrain": PretrainParams, "pupl": PuplParams,
    "classifier": ClassifierParams, "evaluate": EvaluateParams}


def entry_settings(section: MethodSection, name: str, entry: Entry) -> Any:
    """A registry entry's settings from its sub-section of `section` (named `name`)."""
    return entry.settings(section.sub_section(entry.params_key), f"{name}.{entry.params_key}")


def seed_everything(seed: int) -> None:
    """The global generators a step may draw from, as a stage process starts them."""
    import torch  # here: reading params (pucl.params imports this package) needs no torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
