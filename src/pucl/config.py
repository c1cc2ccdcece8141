"""Typed pipeline parameters.

`params.yaml` is the single source of truth for parameters and paths; this module turns
its parsed content into validated pydantic models. Unknown keys are errors (with a
did-you-mean), so a typo never silently falls back to a default.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from pucl.errors import ParamsError, unknown_parameter


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BaseParams(_Section):
    seed: int = Field(0, ge=0, description="seed of every random choice of the method")
    device: Literal["auto", "cpu", "cuda"] = "auto"
    threads: int = Field(2, ge=1, description="torch intra-op threads")


class PathsParams(_Section):
    data_root: str = "data/raw"
    split: str = "data/split"
    prior: str = "data/prior"
    pretrain: str = "data/pretrain"
    pupl: str = "data/pupl"
    classifier: str = "data/classifier"
    evaluate: str = "data/evaluate"
    runs: str = Field("data/runs", description="per-run directories of flows and sweeps")
    # the tracked dataset (data.dataset: tracked): one DVC-tracked directory of batches
    dataset: str = "data/dataset"
    # finished pretrainings by fingerprint (params, seed, split, training code): a sweep
    # whose points differ only downstream trains each encoder once. null: off.
    pretrain_cache: str | None = "data/cache/pretrain"


class TrackingParams(_Section):
    uri: str | None = Field(None, description="MLflow tracking URI (default: sqlite in root)")
    experiment: str = Field("pucl", min_length=1)
    registered_model: str = Field("pucl-classifier", min_length=1,
                                  description="MLflow registered model of retrained classifiers")
    champion_metric: Literal["accuracy", "f1", "roc_auc", "precision", "recall"] = "accuracy"
    min_improvement: float = Field(0.0, ge=0.0, description="margin a challenger must beat")


class DataParams(_Section):
    dataset: str = "mnist5k"
    task: str = "mnist-i"
    test_fraction: float = Field(0.2, gt=0.0, lt=1.0)
    seed: int = Field(0, ge=0, description="seed of the train/test split (fixed across runs)")
    download: bool = Field(False, description="let torchvision fetch missing files")
    path: str | None = Field(None, description="npz file or image folder (datasets npz, "
                             "folder), relative to the project root in params.yaml and "
                             "to the current directory in --set")


class SplitParams(_Section):
    n_p: int = Field(1000, ge=1, description="number of labelled positives")
    scenario: Literal["case_control", "single_dataset"] = "case_control"
    prior: float | None = Field(None, gt=0.0, lt=1.0, description="subsample U to this prior")


class _MethodSection(_Section):
    """A section whose method is looked up in a registry. Besides its own fields it holds
    one sub-section per method with that method's settings (`prior.km`, ...); those are
    checked against the registry before anything runs (`pucl.stages.preflight`), not
    here, so that reading params never imports method code."""

    model_config = ConfigDict(extra="allow", frozen=True)

    @model_validator(mode="after")
    def _extras_are_sub_sections(self) -> _MethodSection:
        for key, value in (self.model_extra or {}).items():
            if not isinstance(value, dict):  # a misspelt field, not a method's settings
                raise ValueError(unknown_parameter(key, type(self).model_fields,
                                                   ", or a method's settings as a sub-section"))
        return self

    def sub_section(self, key: str | None) -> dict[str, Any]:
        value = (self.model_extra or {}).get(key) if key else None
        return value if isinstance(value, dict) else {}


class PriorParams(_MethodSection):
    # an estimator of pucl.prior.PRIOR_ESTIMATORS (tedn, km2, ...) or a source: given
    # (prior.value) or oracle (the true prior of U, benchmarks only)
    method: str = "tedn"
    value: float | None = Field(None, gt=0.0, lt=1.0, description="the prior, for method=given")

    @model_validator(mode="after")
    def _given_needs_value(self) -> PriorParams:
        if self.method == "given" and self.value is None:
            raise ValueError("prior.method 'given' needs prior.value, a number in (0, 1)")
        return self


class AugmentParams(_Section):
    degrees: float = Field(10.0, ge=0.0, le=180.0)
    translate: float = Field(0.1, ge=0.0, le=0.5)
    scale_min: float = Field(0.9, gt=0.0)
    scale_max: float = Field(1.1, gt=0.0)
    brightness: float = Field(0.2, ge=0.0, le=1.0)
    contrast: float = Field(0.2, ge=0.0, le=1.0)
    hflip: float = Field(0.0, ge=0.0, le=1.0, description="probability of a horizontal mirror")
    # Tabular features (float [n, d] data, MLP encoder) get these instead of the above.
    feature_noise: float = Field(0.1, ge=0.0, description="Gaussian noise, in feature stds")
    feature_drop: float = Field(0.1, ge=0.0, lt=1.0,
                                description="probability of masking a feature to its mean")


class PretrainParams(_MethodSection):
    # a method of pucl.pretraining.PRETRAINING_METHODS: contrastive (the loss below, then
    # PUPL + a head downstream); ncpu (paper 001: encoder and classifier trained together,
    # no prior needed; settings in pretrain.ncpu); ssc (paper 003: prototype self-training,
    # its prototypes are the classifier; settings in pretrain.ssc)
    method: str = "contrastive"
    # an encoder of pucl.models.ENCODERS (`pucl methods` lists them)
    encoder: str = "lenet5"
    # a loss of pucl.losses.CONTRASTIVE_LOSSES (sscl, scl_pu, mcl, pucl, punce, dcl, ...)
    loss: str = "pucl"
    temperature: float = Field(0.5, gt=0.0)
    mcl_lambda: float = Field(0.5, ge=0.0, le=1.0, description="MCL mixing weight")
    # PUNCE / DCL: the estimate_prior stage's value, the true prior of U (benchmarks
    # only, tagged as oracle), or a number in [0, 1).
    prior: Literal["estimate", "oracle"] | float = "estimate"
    balance_alpha: float = Field(2.0, gt=0.0, description="balanced loss: alpha")
    balance_lambda: float = Field(1.0, gt=0.0, description="balanced loss: lambda")
    nonneg: Literal["none", "relu", "rep_relu"] = "none"
    epochs: int = Field(50, ge=1)
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


class PuplParams(_MethodSection):
    # a labeller of pucl.pupl.PSEUDO_LABELLERS: auto (the paper's pu_kmeans, unless its
    # share of positives in U is further than kmeans.prior_tolerance from the prior
    # estimate; then prior_rank, and the run says so), pu_kmeans or prior_rank
    method: str = "auto"


class ClassifierParams(_MethodSection):
    # an objective of pucl.classify.objectives.CLASSIFIER_OBJECTIVES: pupl_ce (cross-entropy
    # on the PUPL pseudo-labels, the paper's method); nnpu / upu (the PU risks, eq. 15 / 14,
    # on labelled P vs U; nnpu's settings in classifier.nnpu); naive_ce (U as negative);
    # method_head (the classifier a whole training method learned: pretrain.method ncpu, ssc)
    objective: str = "pupl_ce"
    # nnpu / upu: the estimate_prior stage's value, the true prior of U (oracle,
    # benchmarks only), or a number in (0, 1).
    prior: Literal["estimate", "oracle"] | float = "estimate"
    epochs: int = Field(100, ge=1)
    lr: float = Field(1e-2, gt=0.0)
    weight_decay: float = Field(1e-4, ge=0.0)
    batch_size: int = Field(256, ge=1)
    # What the head reads: the encoder's output, or its convolutional trunk (LeNet-5's
    # 256-d features before its fully connected layers; other encoders have none).
    features: Literal["encoder", "trunk"] = "encoder"
    # Fine-tune the whole network after the head: 0 keeps the encoder frozen.
    finetune_epochs: int = Field(0, ge=0, description="epochs of end-to-end fine-tuning")
    finetune_lr: float = Field(5e-4, gt=0.0, description="fine-tuning learning rate")
    # Neighbour smoothing (pucl.classify.neighbours): a row's score becomes the mean of its
    # own and its k nearest training rows' scores. 0 keeps the head's own score.
    neighbours: int = Field(0, ge=0, description="k nearest training rows whose scores "
                            "each score is averaged with (0: off)")

    @field_validator("prior")
    @classmethod
    def _prior_range(cls, v):
        if isinstance(v, float) and not 0.0 < v < 1.0:
            raise ValueError(f"must be 'estimate', 'oracle' or a number in (0, 1), got {v}")
        return v


class EvaluateParams(_Section):
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


class ValidationParams(_Section):
    """Data contracts between stages (great-expectations suites)."""

    enabled: bool = True
    prior_tolerance: float = Field(0.02, gt=0.0, lt=1.0,
                                   description="U's prior vs split.prior, when that is set")
    feature_variance_floor: float = Field(1e-8, ge=0.0,
                                          description="below it a feature dimension collapsed")
    positive_fraction: tuple[float, float] = Field(
        (0.05, 0.95), description="sane band of the PUPL positive fraction")

    @field_validator("positive_fraction")
    @classmethod
    def _band(cls, v: tuple[float, float]) -> tuple[float, float]:
        if not 0.0 <= v[0] < v[1] <= 1.0:
            raise ValueError(f"must be [low, high] with 0 <= low < high <= 1, got {list(v)}")
        return v


class Params(_Section):
    base: BaseParams = BaseParams()
    paths: PathsParams = PathsParams()
    tracking: TrackingParams = TrackingParams()
    data: DataParams = DataParams()
    split: SplitParams = SplitParams()
    prior: PriorParams = PriorParams()
    pretrain: PretrainParams = PretrainParams()
    pupl: PuplParams = PuplParams()
    classifier: ClassifierParams = ClassifierParams()
    evaluate: EvaluateParams = EvaluateParams()
    validation: ValidationParams = ValidationParams()

    @model_validator(mode="after")
    def _method_head_needs_a_method(self) -> Params:
        if self.classifier.objective == "method_head":
            if self.pretrain.method == "contrastive":
                raise ValueError("classifier.objective 'method_head' needs pretrain.method "
                                 "ncpu or ssc (contrastive pretraining learns no classifier; "
                                 "allowed objectives: pupl_ce, nnpu, upu, naive_ce)")
            if self.classifier.finetune_epochs:
                raise ValueError("classifier.finetune_epochs must be 0 with objective "
                                 "'method_head' (the method already trained end to end)")
            if self.classifier.features != "encoder":
                raise ValueError("classifier.features must be 'encoder' with objective "
                                 "'method_head' (the method's classifier reads the encoder's "
                                 f"output), got {self.classifier.features!r}")
        return self


def _field_names(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """Names allowed at the parent of `loc`, for did-you-mean hints."""
    for key in loc[:-1]:
        field = model.model_fields.get(str(key))
        if field is None or not (isinstance(field.annotation, type)
                                 and issubclass(field.annotation, BaseModel)):
            return []
        model = field.annotation
    return list(model.model_fields)


def _describe(error: dict[str, Any]) -> str:
    loc = tuple(error["loc"])
    key = ".".join(str(p) for p in loc)
    if error["type"] == "extra_forbidden":
        return unknown_parameter(key, _field_names(Params, loc))
    if not loc:  # a rule across sections
        return error["msg"].removeprefix("Value error, ")
    message = error["msg"].removeprefix("Value error, ")
    if message.startswith("unknown parameter '"):  # a misspelt field of a method section
        return message.replace("unknown parameter '", f"unknown parameter '{key}.", 1)
    if isinstance(error.get("input"), dict):  # a rule across fields of one section
        return f"invalid section '{key}': {message}"
    return f"invalid parameter '{key}' = {error.get('input')!r}: {error['msg']}"


def parse_params(raw: dict[str, Any] | None) -> Params:
    """Validate a parsed params mapping; raise ParamsError naming the first bad value."""
    try:
        return Params.model_validate(raw or {})
    except ValidationError as exc:
        raise ParamsError(_describe(exc.errors()[0])) from None


def yaml_problem(exc: yaml.YAMLError) -> str:
    """A YAML error in one line: where and what."""
    mark = getattr(exc, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    what = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return f"{where}{what}"


def read_yaml_mapping(path: str | Path, what: str) -> dict[str, Any]:
    """A YAML file that must hold a mapping (empty file: {}); one-line errors naming it."""
    path = Path(path)
    if not path.is_file():
        raise ParamsError(f"{what} not found: {path}")
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ParamsError(f"{what} {path} is not valid YAML ({yaml_problem(exc)})") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ParamsError(f"{what} {path} must hold a mapping, not a {type(raw).__name__}")
    return raw


def load_params(path: str | Path) -> Params:
    return parse_params(read_yaml_mapping(path, "params file"))


def is_path_key(key: str) -> bool:
    """Params that name a file or directory (relative ones: to the project root in
    params.yaml, to the current directory on the command line)."""
    return key == "data.path" or key.startswith("paths.")


def anchor_paths(overrides: dict[str, Any], directory: Path) -> dict[str, Any]:
    """Relative path values of command-line overrides made absolute against `directory`
    (where the user typed them), so a run directory never changes what they point at."""
    return {k: str((directory / v).resolve()) if is_path_key(k) and isinstance(v, str)
            and not Path(v).is_absolute() else v for k, v in overrides.items()}


def parse_assignments(items: list[str]) -> dict[str, Any]:
    """['pretrain.loss=punce', 'split.n_p=500'] -> {'pretrain.loss': 'punce', 'split.n_p': 500}.
    Values are read as YAML, so numbers, booleans, null and lists keep their types."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ParamsError(f"expected key=value (e.g. pretrain.loss=punce), got {item!r}")
        try:
            out[key] = yaml.safe_load(text) if text.strip() else None
        except yaml.YAMLError:
            out[key] = text
    return out


def apply_overrides(raw: dict[str, Any] | None, overrides: dict[str, Any]) -> dict[str, Any]:
    """A copy of `raw` with dotted keys set ({'pretrain.augment.degrees': 5}); the result
    still goes through `parse_params`, which rejects unknown names."""
    import copy

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
