"""The tracked dataset: PU data that grows batch by batch, under DVC (`paths.dataset`).

Layout of the directory (a DVC dependency of build_split; it is in git with only its
README until `pucl data init`, so that `dvc repro` finds it on a fresh clone):

    README.md            (git) what the directory is
    holdout.npz          (DVC: holdout.npz.dvc) x_test, y_test: the labelled holdout, frozen
                         when the dataset is created; arriving batches never enter it
    batches/00000.npz    (DVC: batches.dvc) x, pu[, y]: the training rows at creation
    batches/00001.npz    the next batch (`pucl data add`), and so on

A batch uses the bring-your-own npz format (`pucl.data.own`) without a test split: `x`
(uint8 images or float features), `pu` (1 labelled positive, 0 unlabeled) and optionally
`y` (true labels, -1 where unknown). Reading concatenates the batches in order, so the
task is `given` and the training rows are every batch's rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pucl.data.own import UNKNOWN, _as_images_or_features, _binary, read_npz
from pucl.data.registry import ImageData, register
from pucl.errors import DataError

HOLDOUT = "holdout.npz"
BATCHES = "batches"
BATCH_KEYS = ("x", "pu", "y")


@dataclass(frozen=True)
class Batch:
    """Training rows of one batch, checked."""

    x: np.ndarray
    pu: np.ndarray
    y: np.ndarray  # -1 where unknown

    def arrays(self) -> dict[str, np.ndarray]:
        return {"x": self.x, "pu": self.pu.astype(np.int8), "y": self.y.astype(np.int8)}


def batch_files(directory: str | Path) -> list[Path]:
    return sorted((Path(directory) / BATCHES).glob("*.npz"))


def is_initialised(directory: str | Path) -> bool:
    return (Path(directory) / HOLDOUT).exists() and bool(batch_files(directory))


def check_batch(arrays: dict[str, np.ndarray], source: str, like: np.ndarray | None = None,
                ) -> Batch:
    """The checks every batch passes before it is appended: keys, dtype and shape (those of
    the rows already tracked, `like`), binary labels, at least one row."""
    extra = sorted(set(arrays) - set(BATCH_KEYS))
    if extra:
        hint = (" (the holdout is frozen: a batch adds training rows only)"
                if {"x_test", "y_test"} & set(extra) else "")
        raise DataError(f"{source}: unexpected arrays {extra}; a batch holds "
                        f"{', '.join(BATCH_KEYS)}{hint}")
    for key in ("x", "pu"):
        if key not in arrays:
            raise DataError(f"{source} has no array '{key}' (has {sorted(arrays)}; a batch "
                            f"holds {', '.join(BATCH_KEYS)})")
    if len(arrays["x"]) == 0:
        raise DataError(f"{source}: the batch is empty (x has 0 rows)")
    x = _as_images_or_features(arrays["x"], f"{source}: x")
    if like is not None and (x.dtype != like.dtype or x.shape[1:] != like.shape[1:]):
        raise DataError(f"{source}: x is {x.dtype} {list(x.shape[1:])} per row; the tracked "
                        f"dataset holds {like.dtype} {list(like.shape[1:])}")
    pu = _binary(arrays["pu"], f"{source}: pu", (0, 1))
    if len(pu) != len(x):
        raise DataError(f"{source}: pu has {len(pu)} rows, x has {len(x)}")
    if "y" in arrays:
        y = _binary(arrays["y"], f"{source}: y", (UNKNOWN, 0, 1))
        if len(y) != len(x):
            raise DataError(f"{source}: y has {len(y)} rows, x has {len(x)}")
        if (y[pu == 1] == 0).any():
            raise DataError(f"{source}: {int((y[pu == 1] == 0).sum())} rows are labelled "
                            "positive in pu but negative in y")
    else:
        y = np.full(len(x), UNKNOWN, dtype=np.int64)
    return Batch(x, pu, np.where(pu == 1, 1, y))


def read_batch(file: Path, like: np.ndarray | None = None) -> Batch:
    return check_batch(read_npz(file), str(file), like)


def read_holdout(directory: str | Path) -> tuple[np.ndarray, np.ndarray]:
    file = Path(directory) / HOLDOUT
    if not file.exists():
        raise DataError(f"{file} does not exist: the tracked dataset is not initialised "
                        "(run: pucl data init)")
    arrays = read_npz(file)
    if set(arrays) != {"x_test", "y_test"}:
        raise DataError(f"{file} must hold exactly x_test and y_test, has {sorted(arrays)}")
    x = _as_images_or_features(arrays["x_test"], f"{file}: x_test")
    y = _binary(arrays["y_test"], f"{file}: y_test", (0, 1))
    return x, y


@register("tracked", tasks=("given",), classes=None, image_shape=None, needs_path=True)
def load_tracked(path: str | None = None, **_ignored) -> ImageData:
    """Every batch of the tracked dataset at `path` (params `paths.dataset`), in order."""
    if not path or not is_initialised(path):
        raise DataError(f"the tracked dataset {path} holds no data yet (run: pucl data init "
                        "[SOURCE], then pucl data add BATCH)")
    x_test, y_test = read_holdout(path)
    batches: list[Batch] = []
    for file in batch_files(path):
        batches.append(read_batch(file, like=batches[0].x if batches else x_test))
    x = np.concatenate([b.x for b in batches])
    pu = np.concatenate([b.pu for b in batches]).astype(bool)
    y = np.concatenate([b.y for b in batches])
    return ImageData("tracked", x, y, x_test, y_test, source=str(path), pu_train=pu)
