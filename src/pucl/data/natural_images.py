"""CIFAR-10, STL-10 and SVHN from their standard on-disk formats under the data root.

The files are read directly (the formats are small and stable; reading them ourselves
keeps loading independent of torchvision's integrity checks, so tests can write tiny
files in the same formats). With `download=True` (params `data.download`) torchvision
fetches them into the data root first, in exactly these layouts:

| dataset | files under the data root |
|---|---|
| cifar10 | `cifar-10-batches-py/data_batch_1..5`, `test_batch` (pickled dicts) |
| stl10 | `stl10_binary/train_X.bin`, `train_y.bin`, `test_X.bin`, `test_y.bin` |
| svhn | `train_32x32.mat`, `test_32x32.mat` (MATLAB; label 10 is the digit 0) |

Every loader uses the dataset's own test split (`data.test_fraction` does not apply).
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

from pucl.data.catalog import ImageData, register
from pucl.errors import DataError


def _require(paths: list[Path], name: str) -> None:
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise DataError(f"dataset '{name}': missing {', '.join(missing)}; set "
                        "paths.data_root, or data.download: true to fetch it")


def _download(name: str, root: str) -> None:
    from torchvision import datasets

    calls = {
        "cifar10": lambda: [datasets.CIFAR10(root, train=t, download=True) for t in (1, 0)],
        "stl10": lambda: [datasets.STL10(root, split=s, download=True)
                          for s in ("train", "test")],
        "svhn": lambda: [datasets.SVHN(root, split=s, download=True) for s in ("train", "test")],
    }
    try:
        calls[name]()
    except Exception as exc:  # torchvision raises RuntimeError / URLError
        raise DataError(f"downloading {name} into {root} failed: {exc}") from None


class _CifarUnpickler(pickle.Unpickler):
    """CIFAR-10's python batches are pickled dicts of bytes, lists and one numpy array.
    Only the globals that rebuild those load (numpy's array and dtype, and Python 3's
    encoding of bytes in old protocols); a crafted file naming any other (a function to
    call) is refused before anything from it runs."""

    ALLOWED = {("numpy._core.multiarray", "_reconstruct"), ("numpy", "ndarray"),
               ("numpy", "dtype"), ("_codecs", "encode")}
    RENAMED = {"numpy.core.multiarray": "numpy._core.multiarray"}  # numpy 1's name

    def find_class(self, module: str, name: str):
        module = self.RENAMED.get(module, module)
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"it names {module}.{name}, which a CIFAR-10 batch "
                                         "never holds (refused: loading it could run code)")
        return super().find_class(module, name)


def _cifar_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    try:
        with open(path, "rb") as fh:
            batch = _CifarUnpickler(fh, encoding="bytes").load()
        data, labels = batch[b"data"], batch[b"labels"]
    except (OSError, pickle.UnpicklingError, EOFError, KeyError, TypeError) as exc:
        raise DataError(f"{path} is not a CIFAR-10 batch ({type(exc).__name__}: {exc})") from None
    x = np.asarray(data, dtype=np.uint8)
    if x.ndim != 2 or x.shape[1] != 3 * 32 * 32 or len(x) != len(labels):
        raise DataError(f"{path}: expected [n, 3072] pixels and n labels, got "
                        f"{list(x.shape)} and {len(labels)}")
    return x.reshape(-1, 3, 32, 32), np.asarray(labels, dtype=np.int64)


@register("cifar10", tasks=("cifar-i", "cifar-ii", "cifar-iii", "cifar-0", "cifar-hard",
                            "cifar-medium", "cifar-easy"),
          classes=tuple(range(10)), image_shape=(3, 32, 32), needs_root=True,
          class_names=("airplane", "automobile", "bird", "cat", "deer", "dog", "frog",
                       "horse", "ship", "truck"))
def load_cifar10(root: str | None = None, download: bool = False, **_ignored) -> ImageData:
    if download and root:
        _download("cifar10", root)
    base = Path(root or ".") / "cifar-10-batches-py"
    train_files = [base / f"data_batch_{i}" for i in range(1, 6)]
    _require([*train_files, base / "test_batch"], "cifar10")
    parts = [_cifar_batch(p) for p in train_files]
    x_test, y_test = _cifar_batch(base / "test_batch")
    return ImageData("cifar10", np.concatenate([p[0] for p in parts]),
                     np.concatenate([p[1] for p in parts]), x_test, y_test, source=str(base))


def _stl_part(base: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    raw = np.fromfile(base / f"{split}_X.bin", dtype=np.uint8)
    labels = np.fromfile(base / f"{split}_y.bin", dtype=np.uint8).astype(np.int64) - 1
    if raw.size % (3 * 96 * 96) or raw.size // (3 * 96 * 96) != len(labels):
        raise DataError(f"{base / f'{split}_X.bin'}: {raw.size} bytes do not hold "
                        f"{len(labels)} images of 3x96x96")
    if len(labels) and (labels.min() < 0 or labels.max() > 9):
        raise DataError(f"{base / f'{split}_y.bin'}: labels must be 1..10")
    # each image is stored column-major (channel, column, row): swap to (channel, row, col)
    return raw.reshape(-1, 3, 96, 96).transpose(0, 1, 3, 2).copy(), labels


STL10_NAMES = ("airplane", "bird", "car", "cat", "deer", "dog", "horse", "monkey", "ship", "truck")


@register("stl10", tasks=("stl-i", "stl-ii", "stl-iii"), classes=tuple(range(10)),
          image_shape=(3, 96, 96), needs_root=True, class_names=STL10_NAMES)
def load_stl10(root: str | None = None, download: bool = False, **_ignored) -> ImageData:
    if download and root:
        _download("stl10", root)
    base = Path(root or ".") / "stl10_binary"
    _require([base / f"{s}_{k}.bin" for s in ("train", "test") for k in ("X", "y")], "stl10")
    x_train, y_train = _stl_part(base, "train")
    x_test, y_test = _stl_part(base, "test")
    return ImageData("stl10", x_train, y_train, x_test, y_test, source=str(base))


@register("stl10u", tasks=("stl-i", "stl-ii"), classes=(-1, *range(10)),
          image_shape=(3, 96, 96), needs_root=True, class_names=STL10_NAMES)
def load_stl10_unlabeled(root: str | None = None, download: bool = False, **_ignored
                         ) -> ImageData:
    """STL-I / STL-II as in paper 000 Table 3: the labelled positives come from the 5,000
    labelled training images, and U also holds the 100,000 images of the unlabeled split,
    whose labels are unknown (-1; its prior is estimated, 0.51 / 0.49 in the paper)."""
    data = load_stl10(root, download)
    base = Path(data.source)
    _require([base / "unlabeled_X.bin"], "stl10u")
    raw = np.fromfile(base / "unlabeled_X.bin", dtype=np.uint8)
    if raw.size % (3 * 96 * 96):
        raise DataError(f"{base / 'unlabeled_X.bin'}: {raw.size} bytes are not a whole number "
                        "of 3x96x96 images")
    extra = raw.reshape(-1, 3, 96, 96).transpose(0, 1, 3, 2)
    return ImageData("stl10u", np.concatenate([data.x_train, extra]),
                     np.r_[data.y_train, np.full(len(extra), -1, dtype=np.int64)],
                     data.x_test, data.y_test, source=str(base))


def _svhn_part(path: Path) -> tuple[np.ndarray, np.ndarray]:
    from scipy.io import loadmat

    try:
        mat = loadmat(path)
        x, y = mat["X"], mat["y"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DataError(f"{path} is not an SVHN .mat file ({type(exc).__name__}: {exc})") from None
    if x.ndim != 4 or x.shape[:3] != (32, 32, 3) or x.shape[3] != y.size:
        raise DataError(f"{path}: expected X [32, 32, 3, n] and n labels, got "
                        f"{list(x.shape)} and {y.size}")
    labels = y.ravel().astype(np.int64) % 10  # SVHN writes the digit 0 as 10
    return np.ascontiguousarray(x.transpose(3, 2, 0, 1)).astype(np.uint8), labels


@register("svhn", tasks=("svhn-i",), classes=tuple(range(10)), image_shape=(3, 32, 32),
          needs_root=True)
def load_svhn(root: str | None = None, download: bool = False, **_ignored) -> ImageData:
    if download and root:
        _download("svhn", root)
    base = Path(root or ".")
    train, test = base / "train_32x32.mat", base / "test_32x32.mat"
    _require([train, test], "svhn")
    x_train, y_train = _svhn_part(train)
    x_test, y_test = _svhn_part(test)
    return ImageData("svhn", x_train, y_train, x_test, y_test, source=str(base))
