"""Sweep specifications: a grid over params and seeds, expanded into named points.

A sweep file (YAML):

    name: loss-by-gamma          # names the MLflow parent run and the run directory
    seeds: [0, 1]                # base.seed values; every grid point runs with each
    grid:                        # cartesian product over dotted params
      pretrain.loss: [pucl, punce]
      split.n_p: [250, 1000]
    set:                         # fixed overrides of every point
      pretrain.epochs: 20
    variants:                    # optional named settings, each crossed with the grid
      pucl_nnpu: {pretrain.loss: pucl, classifier.objective: nnpu}
      punce_pupl: {pretrain.loss: punce}

Variants cover comparisons that are not a cartesian product (method A with its own
options against method B with others). Point names then start with `variant=<name>`.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from pucl.errors import ParamsError, invalid_settings

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class SweepSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="letters, digits, '.', '_' and '-'")
    seeds: list[int] = Field(default_factory=lambda: [0], min_length=1)
    grid: dict[str, list[Any]] = Field(default_factory=dict)
    set: dict[str, Any] = Field(default_factory=dict)
    variants: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # published numbers to print beside the results (pucl bench), per variant name: one
    # number, or one per grid point (keyed like the point names: `n_p=1000`)
    reference: dict[str, float | dict[str, float]] = Field(default_factory=dict)
    # the variant a preset recommends (its best measured): `pucl run --preset NAME` runs it,
    # `pucl bench NAME --variants default` benchmarks it
    default: str | None = None
    # set by `pucl bench --refit`: the sweep whose choice this one trains again (refit_spec)
    refit_of: str | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError(f"must use letters, digits, '.', '_' and '-' only, got {v!r}")
        return v

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, v: list[int]) -> list[int]:
        if any(s < 0 for s in v) or len(set(v)) != len(v):
            raise ValueError(f"must be distinct non-negative integers, got {v}")
        return v

    @field_validator("grid")
    @classmethod
    def _grid(cls, v: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for key, values in v.items():
            if "." not in key:
                raise ValueError(f"keys are dotted params like 'pretrain.loss', got {key!r}")
            if key == "base.seed":
                raise ValueError("put seeds under 'seeds:', not in the grid")
            if not values:
                raise ValueError(f"{key!r} has no values")
        return v

    @field_validator("variants")
    @classmethod
    def _variants(cls, v: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for name, overrides in v.items():
            if not _NAME.match(name):
                raise ValueError(f"variant names use letters, digits, '.', '_' and '-' "
                                 f"only, got {name!r}")
            for key in overrides:
                if "." not in key or key == "base.seed":
                    raise ValueError(f"variant {name!r}: keys are dotted params other than "
                                     f"base.seed, got {key!r}")
        return v

    @model_validator(mode="after")
    def _reference_names_variants(self) -> SweepSpec:
        unknown = sorted(set(self.reference) - set(self.variants))
        if unknown:
            raise ValueError(f"reference names unknown variants {unknown} (variants: "
                             f"{', '.join(self.variants) or 'none'})")
        labels = {point_label(self, dict(zip(self.grid, combo, strict=True)))
                  for combo in itertools.product(*self.grid.values())}
        for variant, numbers in self.reference.items():
            stray = sorted(set(numbers) - labels) if isinstance(numbers, dict) else []
            if stray:
                raise ValueError(f"reference of {variant!r} names {stray[0]!r}, not a grid "
                                 f"point (points: {', '.join(sorted(labels))})")
        if self.default is not None and self.default not in self.variants:
            raise ValueError(f"default names an unknown variant {self.default!r} (variants: "
                             f"{', '.join(self.variants) or 'none'})")
        return self


@dataclass(frozen=True)
class SweepPoint:
    name: str
    overrides: dict[str, Any]
    seed: int
    variant: str | None = None


def parse_sweep(raw: Any, source: str = "sweep file") -> SweepSpec:
    if not isinstance(raw, dict):
        raise ParamsError(f"{source} must hold a mapping with name, seeds, grid and set")
    try:
        return SweepSpec.model_validate(raw)
    except ValidationError as exc:
        raise invalid_settings(exc, SweepSpec, source=source) from None


def variant_overrides(spec: SweepSpec, variant: str | None = None) -> tuple[str, dict[str, Any]]:
    """One variant of a preset as a single run's overrides: the preset's `set`, then the
    variant's own settings on top. Without `variant`, the preset's default."""
    name = variant or spec.default
    allowed = ", ".join(spec.variants) or "none"
    if name is None:
        raise ParamsError(f"preset {spec.name} names no default variant: pick one with "
                          f"--variant (allowed: {allowed})")
    if name not in spec.variants:
        raise ParamsError(f"unknown variant {name!r} of preset {spec.name} (allowed: {allowed})")
    return name, {**spec.set, **spec.variants[name]}


def select_variants(spec: SweepSpec, wanted: list[str]) -> SweepSpec:
    """The preset with only the `wanted` variants (in its own order), their references, and
    its default if wanted; the name 'default' stands for the preset's default variant."""
    allowed = ", ".join(spec.variants) or "none"
    if "default" in wanted and "default" not in spec.variants:  # else the variant so named
        if spec.default is None:
            raise ParamsError(f"preset {spec.name} names no default variant (allowed in "
                              f"--variants: {allowed})")
        wanted = [spec.default if v == "default" else v for v in wanted]
    unknown = [v for v in wanted if v not in spec.variants]
    if unknown:
        raise ParamsError(f"unknown variant {unknown[0]!r} in --variants (allowed: {allowed})")
    return spec.model_copy(update={
        "variants": {k: v for k, v in spec.variants.items() if k in wanted},
        "reference": {k: v for k, v in spec.reference.items() if k in wanted},
        "default": spec.default if spec.default in wanted else None})


# Once a variant is chosen on the validation part, the model worth reporting learns from
# that part too (as GridSearchCV(refit=True) refits on all the data)
REFIT = {"split.val_fraction": 0.0}


def _same(value: Any, read: Any) -> bool:
    """A grid value and the value a table read back for it (1000 and 1000.0 alike)."""
    if _label(value) == _label(read):
        return True
    try:
        return float(value) == float(read)
    except (TypeError, ValueError):
        return False


def refit_spec(spec: SweepSpec, variant: str | None, values: dict[str, Any]) -> SweepSpec:
    """The sweep that trains `variant` (None: the spec has none) again at one grid point
    (`values`, {grid key: value}) on every labelled positive and all of U, on the same
    seeds: REFIT over the variant's own settings, so no variant keeps a validation part."""
    point = {key: next(v for v in spec.grid[key] if _same(v, values[key]))
             for key in spec.grid}  # the spec's own values, whatever type the caller read
    suffix = "".join(f"-{_label(v)}" for v in point.values())
    label, numbers = point_label(spec, point), spec.reference.get(str(variant))
    if isinstance(numbers, dict):  # only the point's own published number is left
        numbers = {label: numbers[label]} if label in numbers else None
    return parse_sweep({
        **spec.model_dump(), "name": f"{spec.name}-refit{suffix}",
        "grid": {key: [value] for key, value in point.items()},
        "set": spec.set if variant else {**spec.set, **REFIT},
        "variants": {variant: {**spec.variants[variant], **REFIT}} if variant else {},
        "reference": {variant: numbers} if variant and numbers is not None else {},
        "default": None, "refit_of": spec.name}, f"refit of {spec.name}")


def load_sweep(path: str | Path) -> SweepSpec:
    from pucl.params.config import read_yaml_mapping

    return parse_sweep(read_yaml_mapping(path, "sweep file"), f"sweep file {path}")


def _label(value: Any) -> str:
    return str(value).replace("/", "_").replace(" ", "")


def _grid_labels(spec: SweepSpec) -> list[str]:
    """Short param names of the grid keys (`n_p`), unless two share one."""
    keys = list(spec.grid)
    short = [k.rsplit(".", 1)[-1] for k in keys]
    return short if len(set(short)) == len(short) else keys


def point_label(spec: SweepSpec, values: dict[str, Any]) -> str:
    """A grid point as its name reads (`task=cifar-i,n_p=1000`), from {grid key: value}."""
    return ",".join(f"{label}={_label(values[key])}"
                    for label, key in zip(_grid_labels(spec), spec.grid, strict=True))


def reference_of(spec: SweepSpec, variant: str | None, values: dict[str, Any]) -> float | None:
    """The published number of a variant at a grid point, if the spec gives one."""
    numbers = spec.reference.get(str(variant))
    if isinstance(numbers, dict):
        return numbers.get(point_label(spec, values))
    return numbers


def expand(spec: SweepSpec) -> list[SweepPoint]:
    """Every grid combination x every seed, with readable unique names
    (`loss=pucl,n_p=250,s0`); short param names unless two grid keys share one."""
    keys = list(spec.grid)
    labels = _grid_labels(spec)
    variants = list(spec.variants.items()) or [(None, {})]
    points = []
    for variant, settings in variants:
        for combo in itertools.product(*(spec.grid[k] for k in keys)):
            for seed in spec.seeds:
                parts = [f"{label}={_label(v)}" for label, v in zip(labels, combo, strict=True)]
                if variant is not None:
                    parts.insert(0, f"variant={variant}")
                name = ",".join([*parts, f"s{seed}"])
                overrides = {**spec.set, **settings, **dict(zip(keys, combo, strict=True)),
                             "base.seed": seed}
                points.append(SweepPoint(name, overrides, seed, variant))
    return points
