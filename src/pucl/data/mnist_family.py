"""MNIST and Fashion-MNIST from their IDX files (60,000 training, 10,000 test images).

Where the files are looked for, in order, under the data root: `<root>/FashionMNIST/raw/`
(torchvision's download layout), `<root>/fashion-mnist/`, `<root>/fmnist/` and `<root>/`
itself; for Fashion-MNIST finally `/usr/share/datasets/fashion-mnist` (Debian's
`dataset-fashion-mnist` package). MNIST likewise with `MNIST/raw/` and `mnist/`.
Each file may be gzip-compressed or not. With `download=True` (params `data.download`)
torchvision fetches missing files into the data root first; nothing is fetched otherwise.
The official test split is used, so `data.test_fraction` does not apply.
"""

from __future__ import annotations

from pathlib import Path

from pucl.data.catalog import ImageData, register
from pucl.data.idx import read_idx
from pucl.errors import DataError

DEBIAN_FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")
FILES = {"x_train": "train-images-idx3-ubyte", "y_train": "train-labels-idx1-ubyte",
         "x_test": "t10k-images-idx3-ubyte", "y_test": "t10k-labels-idx1-ubyte"}


def _candidates(root: str | None, subdirs: tuple[str, ...], system: Path | None) -> list[Path]:
    places = []
    if root:
        base = Path(root)
        places += [base / sub for sub in subdirs] + [base]
    if system is not None:
        places.append(system)
    return places


def _find(directory: Path, stem: str) -> Path | None:
    for candidate in (directory / f"{stem}.gz", directory / stem):
        if candidate.is_file():
            return candidate
    return None


def load_idx_dataset(name: str, root: str | None, torchvision_dir: str,
                     subdirs: tuple[str, ...], system: Path | None, download: bool
                     ) -> ImageData:
    if download and root:
        _download(torchvision_dir, root)
    places = _candidates(root, (f"{torchvision_dir}/raw", *subdirs), system)
    for place in places:
        found = {part: _find(place, stem) for part, stem in FILES.items()}
        if all(found.values()):
            arrays = {part: read_idx(path) for part, path in found.items()}
            for part in ("x_train", "x_test"):
                if arrays[part].ndim != 3:
                    raise DataError(f"{found[part]}: images must be [n, 28, 28], got "
                                    f"{list(arrays[part].shape)}")
                arrays[part] = arrays[part][:, None]  # [n, 1, 28, 28]
            for part in ("y_train", "y_test"):
                arrays[part] = arrays[part].astype("int64")
            if len(arrays["x_train"]) != len(arrays["y_train"]) or \
                    len(arrays["x_test"]) != len(arrays["y_test"]):
                raise DataError(f"{place}: image and label files of {name} disagree in length")
            return ImageData(name, **arrays, source=str(place))
    looked = ", ".join(str(p) for p in places)
    raise DataError(f"dataset '{name}': no IDX files ({FILES['x_train']}[.gz] and the other "
                    f"three) found in {looked}; set paths.data_root, or data.download: true "
                    "to fetch them")


def _download(torchvision_dir: str, root: str) -> None:
    from torchvision import datasets

    cls = {"FashionMNIST": datasets.FashionMNIST, "MNIST": datasets.MNIST}[torchvision_dir]
    for train in (True, False):
        try:
            cls(root, train=train, download=True)
        except Exception as exc:  # torchvision raises bare RuntimeError / URLError
            raise DataError(f"downloading {torchvision_dir} into {root} failed: {exc}") from None


@register("fmnist", tasks=("fmnist-i", "fmnist-ii"), classes=tuple(range(10)),
          image_shape=(1, 28, 28),
          class_names=("T-shirt/top", "trouser", "pullover", "dress", "coat", "sandal",
                       "shirt", "sneaker", "bag", "ankle boot"))
def load_fmnist(root: str | None = None, download: bool = False, **_ignored) -> ImageData:
    return load_idx_dataset("fmnist", root, "FashionMNIST", ("fashion-mnist", "fmnist"),
                            DEBIAN_FASHION_MNIST, download)


@register("mnist", tasks=("mnist-i", "mnist-ii"), classes=tuple(range(10)), image_shape=(1, 28, 28),
          needs_root=True)
def load_mnist(root: str | None = None, download: bool = False, **_ignored) -> ImageData:
    return load_idx_dataset("mnist", root, "MNIST", ("mnist",), None, download)
