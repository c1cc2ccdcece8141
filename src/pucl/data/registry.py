"""Dataset registry: a name maps to a loader returning an `ImageData`.

Loaders are pure functions of their options (no params.yaml); later datasets plug in
with `@register("name", tasks=...)`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pucl.errors import DataError, ParamsError


@dataclass(frozen=True)
class ImageData:
    """Images as uint8 [n, c, h, w] with original integer class labels."""

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    source: str = "embedded"  # where the files were read from

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return tuple(self.x_train.shape[1:])  # type: ignore[return-value]


@dataclass(frozen=True)
class DatasetSpec:
    loader: Callable[..., ImageData]
    tasks: tuple[str, ...]
    classes: tuple[int, ...]  # the original class labels (the raw-data contract)
    image_shape: tuple[int, int, int]
    needs_root: bool = False  # reads files under paths.data_root (embedded data does not)


DATASETS: dict[str, DatasetSpec] = {}


def register(name: str, tasks: tuple[str, ...], classes: tuple[int, ...],
             image_shape: tuple[int, int, int], needs_root: bool = False):
    def wrap(loader: Callable[..., ImageData]) -> Callable[..., ImageData]:
        DATASETS[name] = DatasetSpec(loader, tasks, classes, image_shape, needs_root)
        return loader

    return wrap


def dataset_spec(name: str) -> DatasetSpec:
    try:
        return DATASETS[name]
    except KeyError:
        raise ParamsError(
            f"unknown dataset '{name}' (allowed: {', '.join(sorted(DATASETS))})"
        ) from None


def check_task(dataset: str, task: str) -> None:
    spec = dataset_spec(dataset)
    if task not in spec.tasks:
        raise ParamsError(
            f"task '{task}' is not defined for dataset '{dataset}' "
            f"(allowed: {', '.join(spec.tasks)})"
        )


def check_data_root(name: str, root: str | None) -> None:
    """A dataset read from files needs a readable directory at paths.data_root."""
    import os

    if not dataset_spec(name).needs_root:
        return
    if not root or not os.path.exists(root):
        raise DataError(f"data root {root} does not exist: dataset '{name}' is read from "
                        "there (set paths.data_root)")
    if not os.path.isdir(root) or not os.access(root, os.R_OK | os.X_OK):
        raise DataError(f"data root {root} is not a readable directory (dataset '{name}', "
                        "paths.data_root)")


def load_dataset(name: str, **options) -> ImageData:
    if not options.get("download"):
        check_data_root(name, options.get("root"))
    data = dataset_spec(name).loader(**options)
    for part in ("x_train", "x_test"):
        arr = getattr(data, part)
        if arr.dtype != np.uint8 or arr.ndim != 4:
            raise DataError(f"dataset {name}: {part} is {arr.dtype} {list(arr.shape)}, "
                            "expected uint8 images [n, channels, height, width]")
    return data
