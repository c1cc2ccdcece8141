"""Dataset loaders on tiny files written in the real on-disk formats, and the tasks'
relabelling (paper 000 Appendix B.1). No network: nothing here downloads."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest

import pucl.data.mnist_family as family
from pucl.data import load_dataset
from pucl.data.tasks import get_task
from pucl.errors import DataError

STEMS = {"x_train": "train-images-idx3-ubyte", "y_train": "train-labels-idx1-ubyte",
         "x_test": "t10k-images-idx3-ubyte", "y_test": "t10k-labels-idx1-ubyte"}


def idx_bytes(array: np.ndarray) -> bytes:
    """The IDX format as LeCun's page describes it: 0, 0, type 0x08, ndim, big-endian
    int32 dimensions, then the unsigned bytes."""
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}i", *array.shape)
    return header + array.astype(np.uint8).tobytes()


def write_idx_set(directory: Path, n_train=12, n_test=5, compress=True, seed=0):
    rng = np.random.default_rng(seed)
    arrays = {"x_train": rng.integers(0, 256, (n_train, 28, 28)),
              "y_train": np.arange(n_train) % 10,
              "x_test": rng.integers(0, 256, (n_test, 28, 28)),
              "y_test": (np.arange(n_test) + 3) % 10}
    directory.mkdir(parents=True, exist_ok=True)
    for part, stem in STEMS.items():
        data = idx_bytes(arrays[part])
        if compress:
            (directory / f"{stem}.gz").write_bytes(gzip.compress(data))
        else:
            (directory / stem).write_bytes(data)
    return arrays


@pytest.fixture
def no_system_copy(monkeypatch, tmp_path):
    """Hide the machine's Debian Fashion-MNIST so the tests see only their own files."""
    monkeypatch.setattr(family, "DEBIAN_FASHION_MNIST", tmp_path / "no-debian")


@pytest.mark.parametrize("layout, compress", [("FashionMNIST/raw", False),
                                              ("fashion-mnist", True), ("", True)])
def test_fmnist_reads_idx_files_in_each_layout(tmp_path, no_system_copy, layout, compress):
    arrays = write_idx_set(tmp_path / "root" / layout, compress=compress)
    data = load_dataset("fmnist", root=str(tmp_path / "root"))
    assert data.x_train.shape == (12, 1, 28, 28) and data.x_train.dtype == np.uint8
    np.testing.assert_array_equal(data.x_train[:, 0], arrays["x_train"])
    np.testing.assert_array_equal(data.y_test, arrays["y_test"])
    assert data.source == str(tmp_path / "root" / layout).rstrip("/")


def test_fmnist_falls_back_to_the_debian_location(tmp_path, monkeypatch):
    system = tmp_path / "usr-share"
    arrays = write_idx_set(system, seed=4)
    monkeypatch.setattr(family, "DEBIAN_FASHION_MNIST", system)
    data = load_dataset("fmnist", root=str(tmp_path / "empty-root"))
    np.testing.assert_array_equal(data.x_test[:, 0], arrays["x_test"])
    assert data.source == str(system)


def test_fmnist_missing_files_name_every_place_looked(tmp_path, no_system_copy):
    with pytest.raises(DataError, match="no IDX files") as err:
        load_dataset("fmnist", root=str(tmp_path))
    assert str(tmp_path / "FashionMNIST" / "raw") in str(err.value)
    assert "data.download" in str(err.value)


def test_mnist_reads_torchvision_layout(tmp_path):
    arrays = write_idx_set(tmp_path / "MNIST" / "raw", compress=False, seed=2)
    data = load_dataset("mnist", root=str(tmp_path))
    np.testing.assert_array_equal(data.y_train, arrays["y_train"])
    assert data.x_test.shape == (5, 1, 28, 28)


@pytest.mark.parametrize("corrupt, message", [
    (b"\x01\x02\x08\x03" + b"\x00" * 20, "bad magic number"),
    (bytes([0, 0, 8, 3]) + struct.pack(">3i", 12, 28, 28) + b"\x00" * 100, "holds 100 bytes"),
])
def test_corrupt_idx_is_a_one_line_error(tmp_path, no_system_copy, corrupt, message):
    write_idx_set(tmp_path, compress=False)
    (tmp_path / STEMS["x_train"]).write_bytes(corrupt)
    with pytest.raises(DataError, match=message):
        load_dataset("fmnist", root=str(tmp_path))


@pytest.mark.parametrize("task, positive, prior", [
    ("mnist-i", {0, 2, 4, 6, 8}, 0.5),
    ("fmnist-i", {1, 4, 7}, 0.3),
    ("fmnist-ii", {0, 2, 3, 5, 6, 8, 9}, 0.7),
])
def test_task_relabelling(task, positive, prior):
    labels = np.repeat(np.arange(10), 7)  # balanced classes, as in the benchmarks
    binary = get_task(task).binarize(labels)
    assert {int(c) for c in labels[binary == 1]} == positive
    assert binary.mean() == pytest.approx(prior)
    assert get_task(task).keep(labels).all()


def _images(n, channels, side, seed):
    return np.random.default_rng(seed).integers(0, 256, (n, channels, side, side),
                                                dtype=np.uint8)


def test_cifar10_reads_pickled_batches(tmp_path):
    """CIFAR's python format: each row is the red, then green, then blue 32x32 plane."""
    import pickle

    base = tmp_path / "cifar-10-batches-py"
    base.mkdir()
    images = {}
    for i, name in enumerate([f"data_batch_{k}" for k in range(1, 6)] + ["test_batch"]):
        x = _images(3, 3, 32, seed=i)
        images[name] = x
        rows = np.stack([np.concatenate([x[j, c].ravel() for c in range(3)]) for j in range(3)])
        with open(base / name, "wb") as fh:
            pickle.dump({b"data": rows, b"labels": [i, (i + 1) % 10, 9]}, fh, protocol=2)
    data = load_dataset("cifar10", root=str(tmp_path))
    assert data.x_train.shape == (15, 3, 32, 32) and data.x_test.shape == (3, 3, 32, 32)
    np.testing.assert_array_equal(data.x_train[3:6], images["data_batch_2"])
    np.testing.assert_array_equal(data.x_test, images["test_batch"])
    assert list(data.y_train[:3]) == [0, 1, 9] and list(data.y_test) == [5, 6, 9]


def test_stl10_reads_column_major_binaries(tmp_path):
    base = tmp_path / "stl10_binary"
    base.mkdir()
    truth = {}
    for i, split in enumerate(("train", "test")):
        x = _images(2, 3, 96, seed=10 + i)
        truth[split] = x
        # the binary holds each channel column by column (Fortran order)
        (base / f"{split}_X.bin").write_bytes(x.transpose(0, 1, 3, 2).tobytes())
        (base / f"{split}_y.bin").write_bytes(bytes([1, 10]))
    data = load_dataset("stl10", root=str(tmp_path))
    np.testing.assert_array_equal(data.x_train, truth["train"])
    np.testing.assert_array_equal(data.x_test, truth["test"])
    assert list(data.y_train) == [0, 9]


def test_stl10u_adds_the_unlabeled_split_with_unknown_labels(tmp_path):
    from pucl.data import get_task
    from pucl.data.split import make_pu_split

    base = tmp_path / "stl10_binary"
    base.mkdir()
    for i, split in enumerate(("train", "test")):
        x = _images(4, 3, 96, seed=30 + i)
        (base / f"{split}_X.bin").write_bytes(x.transpose(0, 1, 3, 2).tobytes())
        (base / f"{split}_y.bin").write_bytes(bytes([1, 3, 2, 10]))
    unlabeled = _images(5, 3, 96, seed=40)
    (base / "unlabeled_X.bin").write_bytes(unlabeled.transpose(0, 1, 3, 2).tobytes())
    data = load_dataset("stl10u", root=str(tmp_path))
    assert data.x_train.shape == (9, 3, 96, 96)
    np.testing.assert_array_equal(data.x_train[4:], unlabeled)
    assert list(data.y_train) == [0, 2, 1, 9, -1, -1, -1, -1, -1]
    # labelled positives come only from the labelled split; U holds every row
    task = get_task("stl-i")
    split = make_pu_split(data.y_train, task.positive, 3, "case_control",
                          np.random.default_rng(0))
    assert set(np.flatnonzero(split.labeled)) == {0, 1, 3} and split.in_u.all()


def test_svhn_reads_mat_files_and_maps_label_10_to_digit_0(tmp_path):
    from scipy.io import savemat

    truth = {}
    for i, split in enumerate(("train", "test")):
        x = _images(4, 3, 32, seed=20 + i)
        truth[split] = x
        savemat(tmp_path / f"{split}_32x32.mat",
                {"X": x.transpose(2, 3, 1, 0), "y": np.array([[10], [1], [2], [10]])})
    data = load_dataset("svhn", root=str(tmp_path))
    np.testing.assert_array_equal(data.x_train, truth["train"])
    np.testing.assert_array_equal(data.x_test, truth["test"])
    assert list(data.y_train) == [0, 1, 2, 0]


@pytest.mark.parametrize("dataset, expected", [
    ("cifar10", "cifar-10-batches-py/data_batch_1"), ("stl10", "stl10_binary/train_X.bin"),
    ("svhn", "train_32x32.mat")])
def test_missing_natural_image_files_are_named(tmp_path, dataset, expected):
    with pytest.raises(DataError, match="missing") as err:
        load_dataset(dataset, root=str(tmp_path))
    assert str(tmp_path / expected) in str(err.value)


@pytest.mark.parametrize("task, positive, negative", [
    ("cifar-i", {0, 1, 8, 9}, None), ("cifar-ii", {2, 3, 4, 5, 6, 7}, None),
    ("cifar-iii", {0, 1, 8, 9}, None), ("cifar-0", {5}, {3}), ("cifar-hard", {0, 3}, {2, 5}),
    ("cifar-medium", {0, 3, 5}, {2}), ("cifar-easy", {0, 2}, {3, 5}),
    ("stl-i", {0, 2, 3, 8, 9}, None), ("stl-ii", {1, 4, 5, 6, 7}, None),
    ("stl-iii", {0, 2, 8, 9}, {1, 3, 4, 5, 6, 7}), ("svhn-i", {0, 2, 4, 6, 8}, None)])
def test_natural_image_tasks(task, positive, negative):
    labels = np.repeat(np.arange(10), 3)
    t = get_task(task)
    kept = labels[t.keep(labels)]
    assert set(kept.tolist()) == (set(range(10)) if negative is None else positive | negative)
    assert {int(c) for c in kept[t.binarize(kept) == 1]} == positive
