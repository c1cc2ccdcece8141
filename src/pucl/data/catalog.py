"""Dataset registry: a name maps to a loader returning an `ImageData`.

Loaders are pure functions of their options (no params.yaml); later datasets plug in
with `@register("name", tasks=...)`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pucl.errors import DataError, ParamsError, look_up


@dataclass(frozen=True)
class ImageData:
    """Images as uint8 [n, c, h, w] with original integer class labels."""

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    source: str = "embedded"  # where the files were read from
    # Bring-your-own data gives its labelled positives (bool [n_train]); None: the split
    # stage draws split.n_p of them. Its unknown training labels are -1.
    pu_train: np.ndarray | None = None

    @property
    def is_tabular(self) -> bool:
        return self.x_train.ndim == 2

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return tuple(self.x_train.shape[1:])  # type: ignore[return-value]


@dataclass(frozen=True)
class DatasetSpec:
    loader: Callable[..., ImageData]
    tasks: tuple[str, ...]
    # The original class labels and the input shape (the raw-data contract); None for
    # bring-your-own data, whose labels are binary (-1 unknown) and shape its own.
    classes: tuple[int, ...] | None
    image_shape: tuple[int, ...] | None
    needs_root: bool = False  # reads files under paths.data_root (embedded data does not)
    needs_path: bool = False  # reads the file or folder data.path (bring your own)
    class_names: tuple[str, ...] | None = None  # by class label, for reports (None: the labels)


DATASETS: dict[str, DatasetSpec] = {}


def register(name: str, tasks: tuple[str, ...], classes: tuple[int, ...] | None,
             image_shape: tuple[int, ...] | None, needs_root: bool = False,
             needs_path: bool = False, class_names: tuple[str, ...] | None = None):
    def wrap(loader: Callable[..., ImageData]) -> Callable[..., ImageData]:
        DATASETS[name] = DatasetSpec(loader, tasks, classes, image_shape, needs_root,
                                     needs_path, class_names)
        return loader

    return wrap


def class_name(dataset: str, label: int) -> str:
    """A class label's name for reports ("coat" for Fashion-MNIST's 4), else the label."""
    names = dataset_spec(dataset).class_names
    return names[label] if names and 0 <= label < len(names) else str(label)


def dataset_spec(name: str) -> DatasetSpec:
    return look_up(DATASETS, name, "dataset")


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
                        "there (set paths.data_root to where its files are, or "
                        "data.download: true to fetch them; docs/datasets.md)")
    if not os.path.isdir(root) or not os.access(root, os.R_OK | os.X_OK):
        raise DataError(f"data root {root} is not a readable directory (dataset '{name}', "
                        "paths.data_root)")


def load_dataset(name: str, **options) -> ImageData:
    if not options.get("download"):
        check_data_root(name, options.get("root"))
    data = dataset_spec(name).loader(**options)
    for part in ("x_train", "x_test"):
        arr = getattr(data, part)
        image = arr.dtype == np.uint8 and arr.ndim == 4
        tabular = arr.dtype == np.float32 and arr.ndim == 2
        if not (image or tabular):
            raise DataError(f"dataset {name}: {part} is {arr.dtype} {list(arr.shape)}, "
                            "expected uint8 images [n, channels, height, width] or float32 "
                            "features [n, d]")
    return data
