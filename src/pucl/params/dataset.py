"""The one place params become a dataset: params.data's loader arguments, with its files
found from the project root (paths.data_root, the tracked dataset's directory, data.path)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pucl.data import ImageData, check_task, load_dataset
from pucl.params.config import Params


def data_path(params: Params, root: Path) -> str | None:
    """What the dataset reads: the tracked dataset's directory (`paths.dataset`), or
    data.path (bring-your-own file or folder), resolved against the project root."""
    if params.data.dataset == "tracked":
        return str(root / params.paths.dataset)
    return str(root / params.data.path) if params.data.path else None


def dataset_arguments(params: Params, root: Path) -> dict[str, Any]:
    """`load_dataset`'s arguments for params.data (plain values: a cache can key on them)."""
    d = params.data
    return {"name": d.dataset, "root": str(root / params.paths.data_root),
            "test_fraction": d.test_fraction, "seed": d.seed, "download": d.download,
            "path": data_path(params, root)}


def dataset_of(params: Params, root: Path) -> ImageData:
    """The dataset params.data names, after checking that data.task is one of its tasks."""
    check_task(params.data.dataset, params.data.task)
    return load_dataset(**dataset_arguments(params, root))
