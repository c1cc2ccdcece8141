"""One recipe for a model, from typed settings (pucl.settings): the steps the six DVC stages
call one at a time, wrapping each with files, data contracts and tracking, and that the
scikit-learn estimator (pucl.estimators) calls in memory. Both sides get the same model
from the same settings, data and seed.

Steps, in pipeline order:
- `estimate_prior`: the class prior of U (prior.method, with its settings);
- `pretrain`: one encoder + projection head per seed of `member_seeds` (pretrain.*);
- `pupl_features` and `fit_pseudo_labels`: PUPL's labels on the projector's outputs;
- `fit_classifiers`: a head per encoder with the objective of classifier.objective,
  fine-tuned and smoothed as asked (pucl.classify.fit);
- `view_features` and `member_scores`: scores over members and test-time views
  (evaluate.tta, evaluate.tta_shift).

Every step that draws random numbers seeds what it draws from, so a step gives the same
result whether it runs in a stage process of its own or after the others in memory.
Pure: arrays, modules and settings in and out; no files, no tracking.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from pydantic import BaseModel, ValidationError
from torch import nn

from pucl.classify.fit import ClassifierSettings, Member, fit_member
from pucl.classify.linear import LinearSettings
from pucl.classify.objectives import CLASSIFIER_OBJECTIVES, Targets, TrainingRows
from pucl.data.augment import make_augment, unit_scale
from pucl.errors import DataError, ParamsError, unknown_parameter
from pucl.features import embed, encoder_part, scoring_views
from pucl.losses import CONTRASTIVE_LOSSES
from pucl.models import ENCODERS, ContrastiveModel
from pucl.pretraining import PRETRAINING_METHODS, PretrainJob, PretrainResult
from pucl.prior import PRIOR_ESTIMATORS
from pucl.pupl import PSEUDO_LABELLERS
from pucl.registry import Entry, Registry
from pucl.runtime import seeded_generator
from pucl.settings import (
    ClassifierParams,
    EvaluateParams,
    PretrainParams,
    PriorParams,
    PuplParams,
    _MethodSection,
    apply_overrides,
    check_method_head,
    flatten,
)


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
        """The recipe of a pipeline's params (pucl.config.Params)."""
        return cls(params.prior, params.pretrain, params.pupl, params.classifier,
                   params.evaluate, params.base.seed)

    @classmethod
    def from_settings(cls, settings: dict[str, Any], seed: int = 0) -> Recipe:
        """A recipe from dotted settings over the defaults ({"pretrain.epochs": 20,
        "prior.heldout.folds": 5}), checked as params.yaml is: one-line ParamsError."""
        raw = apply_overrides({}, settings)
        unknown = sorted(set(raw) - set(SECTIONS))
        if unknown:
            raise ParamsError(unknown_parameter(unknown[0], SECTIONS))
        sections = {name: _validated(model, raw.get(name) or {}, name)
                    for name, model in SECTIONS.items()}
        try:
            recipe = cls(**sections, seed=seed)
        except ValueError as exc:  # a rule across sections
            raise ParamsError(str(exc)) from None
        check_methods(recipe)
        return recipe


def _validated(model: type[BaseModel], raw: Any, name: str) -> BaseModel:
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        error = exc.errors()[0]
        key = ".".join(str(part) for part in (name, *error["loc"]))
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            raise ParamsError(unknown_parameter(key, model.model_fields)) from None
        if message.startswith("unknown parameter '"):  # a misspelt field of a method section
            raise ParamsError(message.replace("unknown parameter '", f"unknown parameter "
                                              f"'{key}.", 1)) from None
        raise ParamsError(f"invalid setting '{key}' = {error.get('input')!r}: "
                          f"{message}") from None


SECTIONS: dict[str, type[BaseModel]] = {
    "prior": PriorParams, "pretrain": PretrainParams, "pupl": PuplParams,
    "classifier": ClassifierParams, "evaluate": EvaluateParams}


def entry_settings(section: _MethodSection, name: str, entry: Entry) -> Any:
    """A registry entry's settings from its sub-section of `section` (named `name`)."""
    return entry.settings(section.sub_section(entry.params_key), f"{name}.{entry.params_key}")


def seed_everything(seed: int) -> None:
    """The global generators a step may draw from, as a stage process starts them."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


# -- settings --------------------------------------------------------------------------

# The params chosen from a registry: (section, field, registry, choices that are not
# registry entries). A section's sub-sections hold its registries' entries' settings.
REGISTRY_CHOICES: tuple[tuple[str, str, Registry, tuple[str, ...]], ...] = (
    ("prior", "method", PRIOR_ESTIMATORS, ("given", "oracle")),
    ("pretrain", "method", PRETRAINING_METHODS, ()),
    ("pretrain", "encoder", ENCODERS, ("auto",)),
    ("pretrain", "loss", CONTRASTIVE_LOSSES, ()),
    ("pupl", "method", PSEUDO_LABELLERS, ()),
    ("classifier", "objective", CLASSIFIER_OBJECTIVES, ()),
)


def registry_sections() -> dict[str, str]:
    """The params section each registry's choices and settings live in, by registry kind
    (encoders are chosen in pretrain too, and have no settings)."""
    return {registry.kind: section for section, _, registry, _ in REGISTRY_CHOICES}


def chosen_settings(params) -> dict[str, Any]:
    """Every setting of the methods a run uses, defaults included, flattened
    (`prior.heldout.folds`): params.yaml names only what differs from a method's defaults,
    so this is what MLflow records for comparing runs."""
    flat: dict[str, Any] = {}
    for section_name, key, registry, sources in REGISTRY_CHOICES:
        section = getattr(params, section_name)
        chosen = getattr(section, key)
        if chosen in sources or chosen not in registry:
            continue
        entry = registry.get(chosen)
        if entry.params is not None:
            values = entry.settings(section.sub_section(entry.params_key),
                                    f"{section_name}.{entry.params_key}")
            flat.update(flatten(values.model_dump(mode="json"),
                                f"{section_name}.{entry.params_key}"))
    return flat


def check_methods(params) -> None:
    """Each registry-backed choice names a registered method, and every sub-section holds
    valid settings of a method of that section (typos in unused ones included)."""
    for section_name, key, registry, sources in REGISTRY_CHOICES:
        chosen = getattr(getattr(params, section_name), key)
        if chosen not in sources and chosen not in registry:
            try:
                registry.get(chosen)
            except ParamsError as exc:  # name the parameter, then what exists
                raise ParamsError(f"invalid parameter '{section_name}.{key}' = {chosen!r}: "
                                  f"{exc}") from None
    for section_name in dict.fromkeys(s for s, *_ in REGISTRY_CHOICES):
        section = getattr(params, section_name)
        keys = {e.params_key: e for name, _, registry, _ in REGISTRY_CHOICES
                if name == section_name for e in registry.entries() if e.params_key}
        for key, value in (section.model_extra or {}).items():
            where = f"{section_name}.{key}"
            if key not in keys:
                raise ParamsError(unknown_parameter(
                    where, [*type(section).model_fields, *sorted(keys)]))
            if not isinstance(value, dict):
                raise ParamsError(f"invalid parameter '{where}' = {value!r}: the settings of "
                                  f"{keys[key].name!r} must be a mapping")
            keys[key].settings(value, where)


# -- the class prior ---------------------------------------------------------------------

def estimate_prior(recipe: Recipe, unlabeled: np.ndarray, positive: np.ndarray,
                   progress: bool = False) -> tuple[float, dict]:
    """prior.method's estimate of U's class prior (pixels scaled to [0, 1]) and the
    estimator's details. The sources `given` and `oracle` are the caller's."""
    entry = PRIOR_ESTIMATORS.get(recipe.prior.method)
    estimator = entry.build(entry_settings(recipe.prior, "prior", entry),
                            random_state=recipe.seed, progress=progress)
    try:
        estimator.fit(unit_scale(unlabeled), unit_scale(positive))
    except ValueError as exc:  # too few rows for the estimator, say
        raise DataError(f"prior estimator {recipe.prior.method!r}: {exc}") from None
    return float(estimator.prior_), estimator.details_


# -- pretraining ---------------------------------------------------------------------------

def resolve_encoder(name: str, in_shape: Sequence[int]) -> str:
    """`auto`: mlp for feature rows, lenet5 for 28 x 28 images, cnn7 for other images."""
    if name != "auto":
        return name
    if len(in_shape) == 1:
        return "mlp"
    return "lenet5" if tuple(in_shape[-2:]) == (28, 28) else "cnn7"


def contrastive_model(recipe: Recipe, in_shape: Sequence[int]) -> ContrastiveModel:
    p = recipe.pretrain
    return ContrastiveModel(resolve_encoder(p.encoder, in_shape), tuple(in_shape),
                            p.proj_hidden, p.proj_dim)


def pretraining_method(recipe: Recipe):
    """pretrain.method, built with its settings (pretrain.<method>)."""
    entry = PRETRAINING_METHODS.get(recipe.pretrain.method)
    return entry.build(entry_settings(recipe.pretrain, "pretrain", entry))


def needs_prior(recipe: Recipe) -> bool:
    """Whether pretraining reads the class prior (PUNCE, DCL, SSC's prior-ranked negatives)."""
    return pretraining_method(recipe).uses_prior(recipe.pretrain.loss)


def contrastive_loss(recipe: Recipe, prior: float | None) -> nn.Module:
    """pretrain.loss with its settings (pretrain.<loss>, when it has any), the temperature,
    the non-negative projection and, for PUNCE and DCL, the class prior."""
    p = recipe.pretrain
    entry = CONTRASTIVE_LOSSES.get(p.loss)
    return entry.build(entry_settings(p, "pretrain", entry), temperature=p.temperature,
                       nonneg=p.nonneg, pi=prior)


def member_seeds(recipe: Recipe) -> list[int]:
    """The pretraining seed of each encoder (pretrain.members of them): pretrain.seed
    (else the recipe's seed), then one more for each further member."""
    first = recipe.seed if recipe.pretrain.seed is None else recipe.pretrain.seed
    return [first + k for k in range(recipe.pretrain.members)]


def pretrain(recipe: Recipe, images: torch.Tensor, is_labeled: torch.Tensor,
             prior: float | None, seed: int, device: torch.device, progress: bool = False,
             resume: dict | None = None, on_epoch=None
             ) -> tuple[ContrastiveModel, PretrainResult]:
    """One encoder + projection head, pretrained with `seed` (weights, batches and
    augmentations); `resume` / `on_epoch`: the checkpoint contract of the training loop."""
    p = recipe.pretrain
    torch.manual_seed(seed)  # weights initialise identically on every run
    model = contrastive_model(recipe, images.shape[1:])
    job = PretrainJob(model, contrastive_loss(recipe, prior), images, is_labeled,
                      make_augment(p.augment, images.dim() == 2), p.epochs, p.batch_size,
                      p.lr, p.weight_decay, p.proj_dim, p.proj_hidden, prior,
                      seeded_generator(seed), device, resume=resume, on_epoch=on_epoch,
                      progress=progress)
    result = pretraining_method(recipe).train(job)
    return model.cpu().eval(), result


# -- PUPL --------------------------------------------------------------------------------

def pupl_features(model: ContrastiveModel, images: np.ndarray,
                  device: torch.device | None = None) -> np.ndarray:
    """What PUPL clusters: the projector's L2-normalised outputs, the geometry the
    contrastive loss shaped."""
    return embed(model, images, "projector", device)


def fit_pseudo_labels(recipe: Recipe, features: np.ndarray, labelled: np.ndarray,
                      in_u: np.ndarray, prior: float):
    """pupl.method, fitted on the training rows' features; its `result_` holds the labels."""
    entry = PSEUDO_LABELLERS.get(recipe.pupl.method)
    labeller = entry.build(entry_settings(recipe.pupl, "pupl", entry), prior=prior,
                           random_state=recipe.seed)
    return labeller.fit(features, labelled.astype(np.int64), in_u)


# -- the classifier --------------------------------------------------------------------

def classifier_objective(recipe: Recipe):
    entry = CLASSIFIER_OBJECTIVES.get(recipe.classifier.objective)
    return entry.build(entry_settings(recipe.classifier, "classifier", entry))


def classifier_settings(recipe: Recipe) -> ClassifierSettings:
    p = recipe.classifier
    return ClassifierSettings(LinearSettings(p.epochs, p.lr, p.weight_decay, p.batch_size),
                              p.features, p.finetune_epochs, p.finetune_lr, p.neighbours)


def head_start(recipe: Recipe, model: ContrastiveModel) -> torch.Tensor:
    """The global random state every head initialises from: the seed, advanced by
    building one model like `model` (what a train_classifier process has done when it
    loads the pretrained model), so member k trains as the single run of its encoder."""
    torch.manual_seed(recipe.seed)
    ContrastiveModel(model.encoder_name, model.in_shape, model.proj_hidden, model.proj_dim)
    return torch.get_rng_state()


def fit_classifiers(recipe: Recipe, models: Sequence[ContrastiveModel], x_train: np.ndarray,
                    rows: TrainingRows, prior: float | None, device: torch.device,
                    method_heads: Sequence[nn.Module | None] | None = None,
                    progress: bool = False, announce=None) -> tuple[Targets, list[Member]]:
    """A classifier on each pretrained encoder (fine-tuning changes them in place): the
    objective's targets among the training rows (`x_train` holds every row `rows.index`
    names) and each encoder's member. `announce(k, n)` is told when member k starts."""
    objective = classifier_objective(recipe)
    targets = objective.targets(rows, prior)
    p = recipe.classifier
    if p.neighbours > len(targets.rows):  # checked before any training
        raise ParamsError(f"classifier.neighbours = {p.neighbours} exceeds the "
                        f"{len(targets.rows)} training rows (allowed: 0 to "
                        f"{len(targets.rows)})")
    images = x_train[targets.rows]
    augment = make_augment(recipe.pretrain.augment, images.ndim == 2)
    start = head_start(recipe, models[0])
    heads = method_heads or [None] * len(models)
    members = []
    for k, (model, method_head) in enumerate(zip(models, heads, strict=True)):
        if announce is not None:
            announce(k, len(models))
        torch.set_rng_state(start)
        members.append(fit_member(objective, model, images, targets, classifier_settings(recipe),
                                  augment, seeded_generator(recipe.seed), device, progress,
                                  method_head))
    return targets, members


# -- scoring ---------------------------------------------------------------------------

def views(recipe: Recipe, images: np.ndarray) -> Iterator[np.ndarray]:
    """The test-time views of evaluate.tta and evaluate.tta_shift, one at a time (feature
    rows are scored as they are: mirrors and translations are for images)."""
    image_views = images.ndim == 4
    return scoring_views(images, image_views and recipe.evaluate.tta == "hflip",
                         recipe.evaluate.tta_shift if image_views else 0)


def view_features(recipe: Recipe, members: Sequence[tuple[ContrastiveModel, nn.Module]],
                  images: np.ndarray, reads: str, device: torch.device | None = None
                  ) -> list[list[np.ndarray]]:
    """features[member][view]: what each member's head reads of each view. Views outermost,
    so each is made once and dropped after every member saw it."""
    out: list[list[np.ndarray]] = [[] for _ in members]
    for view in views(recipe, images):
        for kept, (model, _) in zip(out, members, strict=True):
            kept.append(embed(model, view, reads, device))
    return out


def member_scores(heads: Sequence[nn.Module], features: list[list[np.ndarray]]) -> np.ndarray:
    """P(y = 1 | x) as scores[member, view, row]; the classifier's is their mean over the
    first two axes."""
    return np.array([[head.positive_score(f) for f in fs]
                     for head, fs in zip(heads, features, strict=True)])


def scoring_parts(members: Sequence[tuple[ContrastiveModel, nn.Module]], reads: str
                  ) -> list[tuple[nn.Module, nn.Module]]:
    """(the part of each encoder its head reads, the head): what a served model runs."""
    return [(encoder_part(model.encoder, reads), head) for model, head in members]
