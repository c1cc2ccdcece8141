"""The method's typed settings: one pydantic model per params.yaml section of the method
(prior, pretrain with its augmentations, pupl, classifier, evaluate), each field with its
default. This is the one home of those defaults: `pucl.params.config` composes them with the
pipeline's own sections (paths, data, tracking, ...) into `Params`, params.yaml spells
them out (a test checks), and the scikit-learn estimator takes its defaults from here.

Pure: pydantic only, no files, so the core and the estimator can import it.
"""

from __future__ import annotations

import copy
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from pucl.errors import ParamsError, unknown_parameter


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BaseParams(Section):
    seed: int = Field(0, ge=0, description="seed of every random choice of the method")
    device: Literal["auto", "cpu", "cuda"] = "auto"
    threads: int = Field(2, ge=1, description="torch intra-op threads")
    # independent fits of a stage (cross-fitting folds, the heads of several encoders)
    # side by side, each in its own process (pucl.runtime.parallel); never more processes
    # than threads or fits, so a sweep that gives each point one thread runs them here
    fit_workers: int = Field(1, ge=1, description="processes for a stage's independent "
                             "fits, each on base.threads / fit_workers threads (CPU)")


AUTO_FRACTION = "auto"


class SplitParams(Section):
    n_p: int = Field(1000, ge=1, description="number of labelled positives")
    scenario: Literal["case_control", "single_dataset"] = "case_control"
    prior: float | None = Field(None, gt=0.0, lt=1.0, description="subsample U to this prior")
    # the share of labelled positives and of the other rows set aside for the label-free
    # validation estimates (pucl.evaluation.label_free); no training step sees them. 0:
    # none; auto: 0.1, or the smallest share that holds 20 labelled positives and 20
    # members of U (pucl.data.split.resolve_val_fraction)
    val_fraction: Annotated[float, Field(ge=0.0, le=0.5)] | Literal["auto"] = Field(
        "auto", description="validation share (auto: 0.1, or what 20 labelled positives "
        "need)")
    # U's rows at most: above it, training reads a seeded uniform subsample of U (every
    # labelled positive kept), so that the cost of a fit stops growing with the rows
    # (reports/tabular, scale). null: all of U
    max_unlabeled: int | None = Field(100_000, ge=100, description="rows of U at most "
                                      "(a seeded subsample above; null: all)")
    # cross-fitting, the alternative to a validation part: K >= 2 folds of the training
    # rows; the classifier is trained once more per fold without it, and the validation
    # estimates read every labelled positive and member of U, each scored by the fold's
    # classifier that never saw it (pucl.recipe.crossfit). 0: off. auto: 5 folds where
    # val_fraction is auto too and the training rows are at most 20,000, else a validation
    # part (pucl.data.split.resolve_folds)
    folds: Annotated[int, Field(ge=0, le=20)] | Literal["auto"] = Field(
        "auto", description="cross-fitting folds of the validation estimates (0: off, then "
        "split.val_fraction; auto: 5 on up to 20,000 training rows)")

    @model_validator(mode="after")
    def _one_way_to_validate(self) -> SplitParams:
        if self.folds == 1:
            raise ValueError("split.folds = 1 leaves no row out (allowed: 0 for off, 2 to "
                             "20 folds, or auto)")
        if self.folds not in (AUTO_FRACTION, 0) and \
                self.val_fraction not in (AUTO_FRACTION, 0):
            raise ValueError(f"split.folds = {self.folds} scores every training row out of "
                             f"fold, and split.val_fraction = {self.val_fraction} would hold "
                             "rows out of every model as well (allowed with folds: "
                             "val_fraction auto or 0)")
        return self


class MethodSection(Section):
    """A section whose method is looked up in a registry. Besides its own fields it holds
    one sub-section per method with that method's settings (`prior.km`, ...); those are
    checked against the registry before anything runs (`pucl.stages.preflight`), not
    here, so that reading params never imports method code."""

    model_config = ConfigDict(extra="allow", frozen=True)

    @model_validator(mode="after")
    def _extras_are_sub_sections(self) -> MethodSection:
        for key, value in (self.model_extra or {}).items():
            if not isinstance(value, dict):  # a misspelt field, not a method's settings
                raise ValueError(unknown_parameter(key, type(self).model_fields,
                                                   ", or a method's settings as a sub-section"))
        return self

    def sub_section(self, key: str | None) -> dict[str, Any]:
        value = (self.model_extra or {}).get(key) if key else None
        return value if isinstance(value, dict) else {}


class PriorParams(MethodSection):
    # an estimator of pucl.prior.PRIOR_ESTIMATORS (tedn, km2, ...) or a source: given
    # (prior.value) or oracle (the true prior of U, benchmarks only)
    method: str = "tedn"
    value: float | None = Field(None, gt=0.0, lt=1.0, description="the prior, for method=given")

    @model_validator(mode="after")
    def _given_needs_value(self) -> PriorParams:
        if self.method == "given" and self.value is None:
            raise ValueError("prior.method 'given' needs prior.value, a number in (0, 1)")
        return self


class AugmentParams(Section):
    degrees: float = Field(10.0, ge=0.0, le=180.0)
    translate: float = Field(0.1, ge=0.0, le=0.5)
    scale_min: float = Field(0.9, gt=0.0)
    scale_max: float = Field(1.1, gt=0.0)
    brightness: float = Field(0.2, ge=0.0, le=1.0)
    contrast: float = Field(0.2, ge=0.0, le=1.0)
    hflip: float = Field(0.0, ge=0.0, le=1.0, description="probability of a horizontal mirror")
    # Tabular features (float [n, d] data, MLP encoder) get these instead of the above.
    # (reports/tabular: masking half the features, no noise, won the choice from P and U)
    feature_noise: float = Field(0.0, ge=0.0, description="Gaussian noise, in feature stds")
    feature_drop: float = Field(0.5, ge=0.0, lt=1.0,
                                description="probability of masking a feature to its mean")


class PretrainParams(MethodSection):
    # a method of pucl.pretraining.PRETRAINING_METHODS: contrastive (the loss below, then
    # PUPL + a head downstream); ncpu (paper 001: encoder and classifier trained together,
    # no prior needed; settings in pretrain.ncpu); ssc (paper 003: prototype self-training,
    # its prototypes are the classifier; settings in pretrain.ssc)
    method: str = "contrastive"
    # an encoder of pucl.models.ENCODERS (`pucl methods` lists them), or auto: mlp for
    # feature rows, lenet5 for greyscale images of 20 to 64 px a side, cnn7 for others
    # (pucl.recipe.pretraining.resolve_encoder)
    encoder: str = "auto"
    # a loss of pucl.losses.CONTRASTIVE_LOSSES (sscl, scl_pu, mcl, pucl, punce, dcl, ...),
    # or auto: by the kind of input (pucl.recipe.by_input: pucl for images, sscl for
    # feature rows, pucl for tables of over 50,000 rows)
    loss: str = "auto"
    temperature: float = Field(0.5, gt=0.0)
    # PUNCE / DCL: the estimate_prior stage's value, the true prior of U (benchmarks
    # only, tagged as oracle), or a number in [0, 1).
    prior: Literal["estimate", "oracle"] | float = "estimate"
    # auto: by the kind of input (pucl.recipe.by_input: 50 for images, 100 for feature rows,
    # 50 for tables of over 50,000 rows)
    epochs: Annotated[int, Field(ge=1)] | Literal["auto"] = Field(
        "auto", description="pretraining epochs (auto: 50 for images, 100 for feature rows; 50 "
        "above 50,000 rows)")
    batch_size: int = Field(512, ge=2)
    lr: float = Field(2e-3, gt=0.0)
    weight_decay: float = Field(1e-5, ge=0.0)
    proj_dim: int = Field(128, ge=2)
    proj_hidden: int = Field(256, ge=2)
    augment: AugmentParams = AugmentParams()
    # Pretraining's own seed (weight init, batches, augmentations); null: base.seed. The
    # split, PUPL and the classifier keep base.seed, so this varies the encoder alone.
    seed: int | None = Field(None, ge=0, description="seed of pretraining (null: base.seed)")
    # Encoders pretrained on the same split with seeds seed, seed + 1, ...: the classifier
    # fine-tunes a head on each and averages their scores; PUPL and the diagnostics read
    # the first. 1: a single encoder.
    members: int = Field(1, ge=1, le=16, description="encoders averaged by the classifier")


    @field_validator("prior")
    @classmethod
    def _prior_range(cls, v):
        if isinstance(v, float) and not 0.0 <= v < 1.0:
            raise ValueError(f"must be 'estimate', 'oracle' or a number in [0, 1), got {v}")
        return v


class PuplParams(MethodSection):
    # a labeller of pucl.pupl.PSEUDO_LABELLERS: auto (the paper's pu_kmeans, unless its
    # share of positives in U is further than kmeans.share_tolerance from the prior
    # estimate; then prior_rank, and the run says so), pu_kmeans or prior_rank
    method: str = "auto"


class ClassifierParams(MethodSection):
    # an objective of pucl.classify.objectives.CLASSIFIER_OBJECTIVES: pupl_ce (cross-entropy
    # on the PUPL pseudo-labels, the paper's method); nnpu / upu (the PU risks, eq. 15 / 14,
    # on labelled P vs U; nnpu's settings in classifier.nnpu); naive_ce (U as negative);
    # method_head (the classifier a whole training method learned: pretrain.method ncpu, ssc);
    # dist_pu (Dist-PU's label-distribution alignment); dist_pu_pairs: the same head with
    # NcPU's pair loss while fine-tuning; auto: by the kind of input
    # (pucl.recipe.by_input: pupl_ce for images, dist_pu for feature rows)
    objective: str = "auto"
    # nnpu / upu: the estimate_prior stage's value, the true prior of U (oracle,
    # benchmarks only), or a number in (0, 1).
    prior: Literal["estimate", "oracle"] | float = "estimate"
    epochs: int = Field(100, ge=1)
    lr: float = Field(1e-2, gt=0.0)
    # the head's and the fine-tuning's; auto: by the kind of input (pucl.recipe.by_input)
    weight_decay: Annotated[float, Field(ge=0.0)] | Literal["auto"] = Field(
        "auto", description="weight decay of the head and of fine-tuning (auto: 1e-4 for "
        "images, 5e-3 for feature rows, 1e-4 over 50,000 rows)")
    batch_size: int = Field(256, ge=1)
    # What the head reads: the encoder's output, or its convolutional trunk (LeNet-5's
    # 256-d features before its fully connected layers; other encoders have none).
    features: Literal["encoder", "trunk"] = "encoder"
    # Fine-tune the whole network after the head: 0 keeps the encoder frozen; auto: by the
    # kind of input (pucl.recipe.by_input: 0 for images, 60 for feature rows)
    finetune_epochs: Annotated[int, Field(ge=0)] | Literal["auto"] = Field(
        "auto", description="epochs of end-to-end fine-tuning (auto: 0 for images, 60 for "
        "feature rows, 20 over 50,000 rows)")
    finetune_lr: float = Field(5e-4, gt=0.0, description="fine-tuning learning rate")
    # Neighbour smoothing (pucl.classify.neighbours): a row's score becomes the mean of its
    # own and its k nearest training rows' scores. 0 keeps the head's own score.
    neighbours: int = Field(0, ge=0, description="k nearest training rows whose scores "
                            "each score is averaged with (0: off)")
    # With split.folds, what ships: refit (the classifier trained once more on every row)
    # or ensemble (the folds' classifiers, their scores averaged: no refit, so one pass of
    # the classifier step less, and the estimate describes the ensemble's own members).
    # Without folds there is one classifier either way.
    shipped: Literal["refit", "ensemble"] = Field(
        "refit", description="with split.folds: refit on every row, or ship the folds' "
        "classifiers as an ensemble")

    @field_validator("prior")
    @classmethod
    def _prior_range(cls, v):
        if isinstance(v, float) and not 0.0 < v < 1.0:
            raise ValueError(f"must be 'estimate', 'oracle' or a number in (0, 1), got {v}")
        return v


class EvaluateParams(Section):
    # Test-time views (pucl.classify.deployable): hflip scores each image and its mirror
    # image and averages the two; the logged classifier does the same. Images only.
    tta: Literal["none", "hflip"] = Field("none", description="views averaged per test row")
    # ... and tta_shift > 0 also its 8 translations by that many pixels (of each view)
    tta_shift: int = Field(1, ge=0, le=4, description="pixels of the translated test views "
                           "(0: off)")
    knn_k: int = Field(20, ge=1)
    knn_inputs: bool = Field(True, description="also run the kNN probe on the flattened "
                             "inputs (knn_accuracy_inputs), the baseline for knn_accuracy")
    embedding: Literal["tsne", "pca"] = "tsne"
    embedding_points: int = Field(1000, ge=10)
    prototype_views: int = Field(4, ge=0, description="augmented views per test sample for "
                                 "the prototype-bias diagnostic (0: off)")
    # the prior estimate's 95% half-width: the validation estimates' intervals add the part
    # it moves them by to the rows' chance, as an independent error (label_free.Estimate;
    # reports/prior: the default estimator's mean error on F-MNIST-II was 0.032)
    prior_error: float = Field(0.03, ge=0.0, lt=0.5, description="the prior's error, for "
                               "the validation estimates' intervals")



def check_method_head(pretrain: PretrainParams, classifier: ClassifierParams) -> None:
    """The rule across sections for `classifier.objective: method_head` (ValueError)."""
    if classifier.objective != "method_head":
        return
    if pretrain.method == "contrastive":
        raise ValueError("classifier.objective 'method_head' needs pretrain.method ncpu or "
                         "ssc (contrastive pretraining learns no classifier; allowed "
                         "objectives: pupl_ce, nnpu, upu, naive_ce)")
    if classifier.finetune_epochs not in (0, "auto"):
        raise ValueError("classifier.finetune_epochs must be 0 with objective 'method_head' "
                         "(the method already trained end to end)")
    if classifier.features != "encoder":
        raise ValueError("classifier.features must be 'encoder' with objective "
                         f"'method_head' (the method's classifier reads the encoder's "
                         f"output), got {classifier.features!r}")


def apply_overrides(raw: dict[str, Any] | None, overrides: dict[str, Any]) -> dict[str, Any]:
    """A copy of `raw` with dotted keys set ({'pretrain.augment.degrees': 5}); the result
    still goes through `parse_params`, which rejects unknown names."""
    out = copy.deepcopy(raw or {})
    for key, value in overrides.items():
        parts = key.split(".")
        if any(not part for part in parts):
            raise ParamsError(f"invalid parameter name {key!r} (expected section.name)")
        node = out
        for depth, part in enumerate(parts[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ParamsError(f"cannot set '{key}': '{'.'.join(parts[:depth + 1])}' "
                                  "is a value, not a section")
            node = child
        node[parts[-1]] = value
    return out


def flatten(section: BaseModel | dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{'augment': {'degrees': 10}} -> {'prefix.augment.degrees': 10} (MLflow params)."""
    data = section.model_dump() if isinstance(section, BaseModel) else section
    flat: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict):
            flat.update(flatten(value, name))
        else:
            flat[name] = value
    return flat
