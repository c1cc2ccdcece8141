"""Checks of a recipe's (or params') registry choices and method settings, and the
settings of the methods a run uses, as MLflow records them."""

from __future__ import annotations

from typing import Any

from pucl.classify.objectives import CLASSIFIER_OBJECTIVES
from pucl.errors import ParamsError, unknown_parameter
from pucl.losses import CONTRASTIVE_LOSSES
from pucl.models import ENCODERS
from pucl.pretraining import PRETRAINING_METHODS
from pucl.prior import PRIOR_ESTIMATORS
from pucl.pupl import PSEUDO_LABELLERS
from pucl.recipe.settings import flatten
from pucl.registry import Registry

# The params chosen from a registry: (section, field, registry, choices that are not
# registry entries). A section's sub-sections hold its registries' entries' settings.
REGISTRY_CHOICES: tuple[tuple[str, str, Registry, tuple[str, ...]], ...] = (
    ("prior", "method", PRIOR_ESTIMATORS, ("given", "oracle")),
    ("pretrain", "method", PRETRAINING_METHODS, ()),
    ("pretrain", "encoder", ENCODERS, ("auto",)),
    ("pretrain", "loss", CONTRASTIVE_LOSSES, ("auto",)),
    ("pupl", "method", PSEUDO_LABELLERS, ()),
    ("classifier", "objective", CLASSIFIER_OBJECTIVES, ("auto",)),
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
