"""Checks that need the data, run before any stage output is touched (`pucl repro`,
`check`, `run`, `sweep`): so a typo or an impossible setting never costs the last results."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np

from pucl.classify.objectives import CLASSIFIER_OBJECTIVES
from pucl.config import Params
from pucl.data import check_task, get_task, load_dataset
from pucl.errors import DataError, ParamsError, unknown_parameter
from pucl.losses import CONTRASTIVE_LOSSES
from pucl.models import ENCODERS
from pucl.pretraining import PRETRAINING_METHODS
from pucl.prior import PRIOR_ESTIMATORS
from pucl.pupl import PSEUDO_LABELLERS
from pucl.registry import Registry
from pucl.settings import flatten
from pucl.stages._context import data_path

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


def chosen_settings(params: Params) -> dict[str, Any]:
    """Every setting of the methods a run uses, defaults included, flattened
    (`prior.heldout.folds`): params.yaml names only what differs from a method's defaults,
    so this is what MLflow records for comparing runs."""
    flat: dict[str, Any] = {}
    for section_name, field, registry, sources in REGISTRY_CHOICES:
        section = getattr(params, section_name)
        chosen = getattr(section, field)
        if chosen in sources or chosen not in registry:
            continue
        entry = registry.get(chosen)
        if entry.params is not None:
            values = entry.settings(section.sub_section(entry.params_key),
                                    f"{section_name}.{entry.params_key}")
            flat.update(flatten(values.model_dump(mode="json"),
                                f"{section_name}.{entry.params_key}"))
    return flat


def check_methods(params: Params) -> None:
    """Each registry-backed choice names a registered method, and every sub-section holds
    valid settings of a method of that section (typos in unused ones included)."""
    for section_name, field, registry, sources in REGISTRY_CHOICES:
        chosen = getattr(getattr(params, section_name), field)
        if chosen not in sources and chosen not in registry:
            try:
                registry.get(chosen)
            except ParamsError as exc:  # name the parameter, then what exists
                raise ParamsError(f"invalid parameter '{section_name}.{field}' = {chosen!r}: "
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


@functools.lru_cache(maxsize=8)
def _training_labels(dataset: str, data_root: str, test_fraction: float, seed: int,
                     download: bool, path: str | None
                     ) -> tuple[np.ndarray, tuple[int, ...], np.ndarray | None]:
    """Labels, input shape and given PU labels of the training data (cached: a sweep
    checks every point)."""
    data = load_dataset(dataset, root=data_root, test_fraction=test_fraction, seed=seed,
                        download=download, path=path)
    return data.y_train, tuple(data.image_shape), data.pu_train


@functools.lru_cache(maxsize=8)
def _encoder_fits(encoder: str, shape: tuple[int, ...], proj_hidden: int, proj_dim: int
                  ) -> str | None:
    """None when the model takes images of this shape, else why not."""
    import torch

    from pucl.models import ContrastiveModel

    try:
        model = ContrastiveModel(encoder, shape, proj_hidden, proj_dim).eval()
        with torch.no_grad():
            model(torch.zeros(2, *shape))
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
    return None


def check_inputs(params: Params, root: Path) -> None:
    """Rules that need the data, checked before any stage output is touched (pucl repro,
    check, run, sweep): the data loads, n_p fits the task's positives, the encoder fits
    the image shape."""
    check_methods(params)
    check_task(params.data.dataset, params.data.task)
    y_train, shape, given_pu = _training_labels(
        params.data.dataset, str(root / params.paths.data_root), params.data.test_fraction,
        params.data.seed, params.data.download, data_path(params, root))
    task = get_task(params.data.task)
    kept = y_train[task.keep(y_train)]
    positives = int(task.binarize(kept).sum())
    if given_pu is not None:  # bring your own: the file's PU labels replace split.n_p
        if params.split.prior is not None:
            raise ParamsError(f"split.prior = {params.split.prior} needs true labels for "
                              f"every row; dataset '{params.data.dataset}' gives its own PU "
                              "split (allowed: null)")
    elif positives == 0:
        raise DataError(f"the {params.data.dataset} training data holds no positive of task "
                        f"{params.data.task}: nothing can be labelled")
    elif params.split.n_p > positives:
        raise ParamsError(f"split.n_p = {params.split.n_p} exceeds the {positives} positives "
                          f"of task {params.data.task} in the {params.data.dataset} training "
                          f"data (allowed: 1 to {positives})")
    elif params.split.scenario == "single_dataset" and params.split.n_p >= len(kept):
        raise DataError(f"split.n_p = {params.split.n_p} labels every training row: with "
                        "scenario single_dataset the unlabeled set U would be empty")
    if params.evaluate.tta == "hflip" and len(shape) != 3:
        raise ParamsError(f"evaluate.tta = 'hflip' mirrors images, but {params.data.dataset} "
                          f"rows have shape {list(shape)} (allowed for feature rows: none)")
    p = params.pretrain
    from pucl.recipe import resolve_encoder

    encoder = resolve_encoder(p.encoder, shape)
    problem = _encoder_fits(encoder, shape, p.proj_hidden, p.proj_dim)
    if problem:
        raise ParamsError(f"pretrain.encoder = {p.encoder!r} does not fit "
                          f"{params.data.dataset} images of shape {list(shape)} ({problem})")
