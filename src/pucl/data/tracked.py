"""The tracked dataset: PU data that grows batch by batch, under DVC (`paths.dataset`).

Layout of the directory (a DVC dependency of build_split; it is in git with only its
README until `pucl data init`, so that `dvc repro` finds it on a fresh clone):

    README.md            (git) what the directory is
    holdout.npz          (DVC: holdout.npz.dvc) the holdout, frozen when the dataset is
                         created; arriving batches never enter it. Labelled: x_test, y_test.
                         PU (data with P and U alone): x_test, pu_test (1 labelled
                         positive, 0 unlabeled), y_test (-1 where unknown) and prior (U's
                         class prior, estimated when the holdout was frozen)
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

from pucl.data.catalog import ImageData, register
from pucl.data.own import UNKNOWN, as_images_or_features, binary_labels, read_npz
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
    x = as_images_or_features(arrays["x"], f"{source}: x")
    if like is not None and (x.dtype != like.dtype or x.shape[1:] != like.shape[1:]):
        raise DataError(f"{source}: x is {x.dtype} {list(x.shape[1:])} per row; the tracked "
                        f"dataset holds {like.dtype} {list(like.shape[1:])}")
    pu = binary_labels(arrays["pu"], f"{source}: pu", (0, 1))
    if len(pu) != len(x):
        raise DataError(f"{source}: pu has {len(pu)} rows, x has {len(x)}")
    if "y" in arrays:
        y = binary_labels(arrays["y"], f"{source}: y", (UNKNOWN, 0, 1))
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


LABELLED_KEYS, PU_KEYS = {"x_test", "y_test"}, {"x_test", "pu_test", "y_test", "prior"}
# a PU holdout frozen since 2026-12-03 also keeps its prior's 95% half-width (where the
# estimator measured one); one frozen before reads without it
PU_OPTIONAL = "prior_halfwidth"


@dataclass(frozen=True)
class Holdout:
    """The frozen holdout every model is scored on. Labelled: `y` known on every row, no
    `pu`. PU: `pu` marks held-out labelled positives, `y` is -1 where unknown, and `prior`
    is U's class prior, frozen with the rows so that every score reads the same one, with
    its 95% half-width where its estimator measured one (the error every interval on the
    holdout covers, where it exceeds evaluate.prior_error)."""

    x: np.ndarray
    y: np.ndarray
    pu: np.ndarray | None = None
    prior: float | None = None
    prior_halfwidth: float | None = None

    @property
    def labelled(self) -> bool:
        """Every row's label is known: a labelled score can be computed."""
        return len(self.y) > 0 and bool((self.y >= 0).all())

    def arrays(self) -> dict[str, np.ndarray]:
        if self.pu is None:
            return {"x_test": self.x, "y_test": self.y.astype(np.int8)}
        if self.prior is None:
            raise ValueError("a PU holdout is written with its prior (datastore.freeze_prior)")
        return {"x_test": self.x, "pu_test": self.pu.astype(np.int8),
                "y_test": self.y.astype(np.int8), "prior": np.float64(self.prior),
                **({PU_OPTIONAL: np.float64(self.prior_halfwidth)}
                   if self.prior_halfwidth is not None else {})}


def read_holdout(directory: str | Path) -> Holdout:
    file = Path(directory) / HOLDOUT
    if not file.exists():
        raise DataError(f"{file} does not exist: the tracked dataset is not initialised "
                        "(run: pucl data init)")
    arrays = read_npz(file)
    if set(arrays) not in (LABELLED_KEYS, PU_KEYS, PU_KEYS | {PU_OPTIONAL}):
        raise DataError(f"{file} must hold {', '.join(sorted(LABELLED_KEYS))} (labelled) or "
                        f"{', '.join(sorted(PU_KEYS))} and optionally {PU_OPTIONAL} (PU), has "
                        f"{sorted(arrays)}")
    x = as_images_or_features(arrays["x_test"], f"{file}: x_test")
    if "pu_test" not in arrays:
        return Holdout(x, binary_labels(arrays["y_test"], f"{file}: y_test", (0, 1)))
    pu = binary_labels(arrays["pu_test"], f"{file}: pu_test", (0, 1))
    y = binary_labels(arrays["y_test"], f"{file}: y_test", (UNKNOWN, 0, 1))
    prior = float(arrays["prior"])
    if not 0.0 < prior < 1.0 or len(pu) != len(x) or len(y) != len(x):
        raise DataError(f"{file}: a PU holdout needs pu_test and y_test of x_test's "
                        f"{len(x)} rows and a prior in (0, 1), has {len(pu)}, {len(y)} and "
                        f"{prior}")
    halfwidth = float(arrays[PU_OPTIONAL]) if PU_OPTIONAL in arrays else None
    if halfwidth is not None and not 0.0 <= halfwidth < 1.0:
        raise DataError(f"{file}: {PU_OPTIONAL} = {halfwidth} must be in [0, 1)")
    return Holdout(x, np.where(pu == 1, 1, y), pu, prior, halfwidth)


@register("tracked", tasks=("given",), classes=None, image_shape=None, needs_path=True)
def load_tracked(path: str | None = None, **_ignored) -> ImageData:
    """Every batch of the tracked dataset at `path` (params `paths.dataset`), in order."""
    if not path or not is_initialised(path):
        raise DataError(f"the tracked dataset {path} holds no data yet (run: pucl data init "
                        "[SOURCE], then pucl data add BATCH)")
    holdout = read_holdout(path)
    # the labelled test split: the holdout's rows where every label is known, else none
    # (P and U alone: the validation estimates judge the runs)
    x_test, y_test = ((holdout.x, holdout.y) if holdout.labelled
                      else (holdout.x[:0], np.zeros(0, dtype=np.int64)))
    batches: list[Batch] = []
    for file in batch_files(path):
        batches.append(read_batch(file, like=batches[0].x if batches else holdout.x))
    x = np.concatenate([b.x for b in batches])
    pu = np.concatenate([b.pu for b in batches]).astype(bool)
    y = np.concatenate([b.y for b in batches])
    return ImageData("tracked", x, y, x_test, y_test, source=str(path), pu_train=pu)
