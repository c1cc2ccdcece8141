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
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from pucl.errors import ParamsError, invalid_settings
from pucl.recipe.settings import (
    BaseParams,
    ClassifierParams,
    EvaluateParams,
    PretrainParams,
    PriorParams,
    PuplParams,
    Section,
    SplitParams,
    check_method_head,
)


class PathsParams(Section):
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


class TrackingParams(Section):
    uri: str | None = Field(None, description="MLflow tracking URI (default: sqlite in root)")
    experiment: str = Field("pucl", min_length=1)
    registered_model: str = Field("pucl-classifier", min_length=1,
                                  description="MLflow registered model of retrained classifiers")
    champion_metric: Literal["accuracy", "f1", "roc_auc", "precision", "recall"] = "accuracy"
    min_improvement: float = Field(0.0, ge=0.0, description="margin a challenger must beat")


class DataParams(Section):
    dataset: str = "mnist5k"
    task: str = "mnist-i"
    test_fraction: float = Field(0.2, gt=0.0, lt=1.0)
    seed: int = Field(0, ge=0, description="seed of the train/test split (fixed across runs)")
    download: bool = Field(False, description="let torchvision fetch missing files")
    path: str | None = Field(None, description="npz file or image folder (datasets npz, "
                             "folder), relative to the project root in params.yaml and "
                             "to the current directory in --set")


class ValidationParams(Section):
    """Data contracts between stages (great-expectations suites)."""

    enabled: bool = True
    prior_tolerance: float = Field(0.02, gt=0.0, lt=1.0,
                                   description="U's prior vs split.prior, when that is set")
    positive_fraction: tuple[float, float] = Field(
        (0.05, 0.95), description="sane band of the PUPL positive fraction")

    @field_validator("positive_fraction")
    @classmethod
    def _band(cls, v: tuple[float, float]) -> tuple[float, float]:
        if not 0.0 <= v[0] < v[1] <= 1.0:
            raise ValueError(f"must be [low, high] with 0 <= low < high <= 1, got {list(v)}")
        return v


class Params(Section):
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
        check_method_head(self.pretrain, self.classifier)
        return self


def parse_params(raw: dict[str, Any] | None) -> Params:
    """Validate a parsed params mapping; raise ParamsError naming the first bad value."""
    try:
        return Params.model_validate(raw or {})
    except ValidationError as exc:
        raise invalid_settings(exc, Params) from None


def yaml_problem(exc: yaml.YAMLError) -> str:
    """A YAML error in one line: where and what."""
    mark = getattr(exc, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    what = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return f"{where}{what}"


# libyaml's parser where PyYAML has it: the same documents, about ten times faster (params
# and presets are read by every stage, command and sweep point)
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(text: str) -> Any:
    """yaml.safe_load, by libyaml when available."""
    return yaml.load(text, Loader=_SAFE_LOADER)  # noqa: S506 (a safe loader)


def read_yaml_mapping(path: str | Path, what: str) -> dict[str, Any]:
    """A YAML file that must hold a mapping (empty file: {}); one-line errors naming it."""
    path = Path(path)
    if not path.is_file():
        raise ParamsError(f"{what} not found: {path}")
    try:
        raw = load_yaml(path.read_text())
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
            out[key] = load_yaml(text) if text.strip() else None
        except yaml.YAMLError:
            out[key] = text
    return out


