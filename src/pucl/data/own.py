"""Bring your own PU data: an `.npz` file or an image folder (params `data.path`).

Both give the PU labels themselves, so the task is `given` (positive = 1) and the split
stage keeps the file's labelled positives instead of drawing `split.n_p` of them.
Training labels may be unknown: `y_train` holds -1 there (the unlabeled set U of real PU
data), and the diagnostics that need true labels use the rows that have them. A test
split, where there is one, is labelled; data with P and U alone has none, and the
label-free validation estimates judge the classifier (docs/evaluation.md).

`npz` keys:
- `x`: uint8 images [n, h, w] or [n, c, h, w], or float features [n, d] (tabular; use
  `pretrain.encoder: mlp`, whose augmentations are feature noise and feature dropout);
- `pu`: [n] 1 for a labelled positive, 0 for unlabeled;
- `y` (optional): [n] true binary labels of the training rows (-1 where unknown);
- `x_test`, `y_test` (optional): a labelled test split. Without them `data.test_fraction`
  of the rows with a known `y` (never labelled positives) is held out, seeded by
  `data.seed`; with too few such rows of both classes (no `y` at all, say), there is no
  test split.

`folder` layout: `positive/` (labelled positives), `unlabeled/`, and `test/positive/` +
`test/negative/`. Images are read with Pillow; all must share one size; the colour mode
is greyscale when every image is, else RGB.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pucl.data.catalog import ImageData, register
from pucl.data.inputs import as_model_input, as_stored_pixels
from pucl.errors import DataError

UNKNOWN = -1
NPZ_KEYS = ("x", "pu", "y", "x_test", "y_test")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp")


def _need_path(path: str | None, kind: str) -> Path:
    if not path:
        raise DataError(f"dataset '{kind}' reads data.path, which is not set (give the "
                        f"{'.npz file' if kind == 'npz' else 'folder'}, relative to the "
                        "project root)")
    p = Path(path)
    if not p.exists():
        raise DataError(f"data.path {p} does not exist (dataset '{kind}')")
    return p


def as_images_or_features(x: np.ndarray, what: str) -> np.ndarray:
    """uint8 images [n, c, h, w] (floats in [0, 1] rounded to 8-bit pixels) or float32
    feature rows [n, d]: what pucl.data.inputs accepts, as the pipeline stores it."""
    return as_stored_pixels(as_model_input(x, what))


def binary_labels(values: np.ndarray, what: str, allowed: tuple[int, ...]) -> np.ndarray:
    values = np.asarray(values)
    if values.ndim != 1 or not np.issubdtype(values.dtype, np.number):
        raise DataError(f"{what} must be a 1-D numeric array, got {values.dtype} "
                        f"{list(values.shape)}")
    bad = sorted(set(np.unique(values).tolist()) - set(allowed))
    if bad:
        raise DataError(f"{what} holds {bad[:5]}; allowed values: {list(allowed)}")
    return values.astype(np.int64)


def own_data(name: str, x: np.ndarray, pu: np.ndarray, y: np.ndarray | None,
             x_test: np.ndarray | None, y_test: np.ndarray | None, test_fraction: float,
             seed: int, source: str) -> ImageData:
    """Checks and assembles user-given arrays (shared by npz and folder)."""
    x = as_images_or_features(x, f"{source}: x")
    pu = binary_labels(pu, f"{source}: pu", (0, 1))
    if len(pu) != len(x):
        raise DataError(f"{source}: pu has {len(pu)} rows, x has {len(x)}")
    if not pu.any():
        raise DataError(f"{source}: pu marks no labelled positive (need at least one 1)")
    if pu.all():
        raise DataError(f"{source}: pu labels every row; PU learning needs unlabeled rows")
    if y is None:
        y = np.full(len(x), UNKNOWN, dtype=np.int64)
    else:
        y = binary_labels(y, f"{source}: y", (UNKNOWN, 0, 1))
        if len(y) != len(x):
            raise DataError(f"{source}: y has {len(y)} rows, x has {len(x)}")
        if (y[pu == 1] == 0).any():
            raise DataError(f"{source}: {int((y[pu == 1] == 0).sum())} rows are labelled "
                            "positive in pu but negative in y")
    y = np.where(pu == 1, 1, y)  # a labelled positive is a known positive

    if (x_test is None) != (y_test is None):
        raise DataError(f"{source}: give both x_test and y_test, or neither")
    if x_test is None:
        x, y, pu, x_test, y_test = _hold_out(x, y, pu, test_fraction, seed)
    else:
        x_test = as_images_or_features(x_test, f"{source}: x_test")
        y_test = binary_labels(y_test, f"{source}: y_test", (0, 1))
        if len(y_test) != len(x_test):
            raise DataError(f"{source}: y_test has {len(y_test)} rows, x_test has "
                            f"{len(x_test)}")
        if x_test.shape[1:] != x.shape[1:] or x_test.dtype != x.dtype:
            raise DataError(f"{source}: x_test is {x_test.dtype} {list(x_test.shape[1:])}, "
                            f"x is {x.dtype} {list(x.shape[1:])}; they must match")
    return ImageData(name, x, y, x_test, y_test, source=source, pu_train=pu.astype(bool))


def _hold_out(x, y, pu, test_fraction: float, seed: int):
    """A labelled test split from the rows with a known y that are not labelled positives;
    an empty one when too few such rows of both classes exist (P and U only)."""
    from sklearn.model_selection import train_test_split

    eligible = np.flatnonzero((y != UNKNOWN) & (pu == 0))
    if len(eligible) < 2 or len(np.unique(y[eligible])) < 2:
        return x, y, pu, x[:0], np.zeros(0, dtype=np.int64)
    _, test = train_test_split(eligible, test_size=test_fraction, stratify=y[eligible],
                               random_state=seed)
    keep = np.ones(len(x), dtype=bool)
    keep[test] = False
    return x[keep], y[keep], pu[keep], x[np.sort(test)], y[np.sort(test)]


def read_npz(file: Path) -> dict[str, np.ndarray]:
    import zipfile

    if file.is_file() and not zipfile.is_zipfile(file):  # numpy would say "pickled"
        raise DataError(f"{file} is not an .npz archive (numpy writes one with "
                        "np.savez(path, x=..., pu=...))")
    try:
        with np.load(file, allow_pickle=False) as archive:
            return {k: archive[k] for k in archive.files}
    except Exception as exc:  # zipfile / numpy errors name the problem
        raise DataError(f"cannot read {file} as .npz: {type(exc).__name__}: {exc}") from None


@register("npz", tasks=("given",), classes=None, image_shape=None, needs_path=True)
def load_npz(path: str | None = None, test_fraction: float = 0.2, seed: int = 0,
             **_ignored) -> ImageData:
    file = _need_path(path, "npz")
    arrays = read_npz(file)
    for key in ("x", "pu"):
        if key not in arrays:
            raise DataError(f"{file} has no array '{key}' (has {sorted(arrays)}; "
                            f"known keys: {', '.join(NPZ_KEYS)})")
    return own_data("npz", arrays["x"], arrays["pu"], arrays.get("y"), arrays.get("x_test"),
                    arrays.get("y_test"), test_fraction, seed, str(file))


def image_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES)


def read_images(files: list[Path]) -> np.ndarray:
    from PIL import Image

    images = []
    for f in files:
        try:
            with Image.open(f) as im:
                images.append(im.convert("RGB") if im.mode not in ("L", "RGB") else im.copy())
        except Exception as exc:
            raise DataError(f"cannot read image {f}: {type(exc).__name__}: {exc}") from None
    first = images[0].size
    for f, im in zip(files, images, strict=True):
        if im.size != first:
            raise DataError(f"images must share one size: {files[0]} is {first[0]}x"
                            f"{first[1]}, {f} is {im.size[0]}x{im.size[1]} (resize first)")
    mode = "L" if all(im.mode == "L" for im in images) else "RGB"
    arrays = [np.asarray(im.convert(mode), dtype=np.uint8) for im in images]
    stacked = np.stack(arrays)
    return stacked[:, None] if mode == "L" else stacked.transpose(0, 3, 1, 2)


@register("folder", tasks=("given",), classes=None, image_shape=None, needs_path=True)
def load_folder(path: str | None = None, **_ignored) -> ImageData:
    root = _need_path(path, "folder")
    parts = {"positive": root / "positive", "unlabeled": root / "unlabeled",
             "test/positive": root / "test" / "positive",
             "test/negative": root / "test" / "negative"}
    files = {}
    for part, directory in parts.items():
        files[part] = image_files(directory) if directory.is_dir() else []
        if not files[part]:
            raise DataError(f"{directory} holds no image ({', '.join(IMAGE_SUFFIXES)}); the "
                            "folder layout is positive/, unlabeled/, test/positive/, "
                            "test/negative/")
    order = [*files["positive"], *files["unlabeled"], *files["test/positive"],
             *files["test/negative"]]
    images = read_images(order)
    n_pos, n_unl = len(files["positive"]), len(files["unlabeled"])
    n_train = n_pos + n_unl
    pu = np.r_[np.ones(n_pos, np.int64), np.zeros(n_unl, np.int64)]
    y_test = np.r_[np.ones(len(files["test/positive"]), np.int64),
                   np.zeros(len(files["test/negative"]), np.int64)]
    return own_data("folder", images[:n_train], pu, None, images[n_train:], y_test, 0.2, 0,
                    str(root))
