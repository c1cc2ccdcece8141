"""Evaluation metrics against hand counts."""

from __future__ import annotations

import numpy as np

from pucl.evaluation.metrics import errors_by_class


def test_errors_by_class_counts_each_original_classes_mistakes():
    # classes 0 and 1 are positive, 7 negative; mistakes: one 0, both 7s, no 1
    classes = np.array([7, 0, 0, 1, 7, 0, 1])
    y_true = np.array([0, 1, 1, 1, 0, 1, 1])
    y_pred = np.array([1, 1, 0, 1, 1, 1, 1])
    table = errors_by_class(classes, y_true, y_pred)
    assert table["class"].tolist() == [0, 1, 7]
    assert table["label"].tolist() == [1, 1, 0]
    assert table["rows"].tolist() == [3, 2, 2]
    assert table["errors"].tolist() == [1, 0, 2]
    np.testing.assert_allclose(table["error_rate"], [1 / 3, 0.0, 1.0])
    np.testing.assert_allclose(table["share_of_errors"], [1 / 3, 0.0, 2 / 3])


def test_errors_by_class_without_mistakes_has_zero_shares():
    table = errors_by_class(np.array([3, 4]), np.array([1, 0]), np.array([1, 0]))
    assert table["errors"].tolist() == [0, 0] and table["share_of_errors"].tolist() == [0, 0]


def test_class_names_follow_the_datasets_labels():
    from pucl.data.catalog import class_name

    assert class_name("fmnist", 4) == "coat" and class_name("fmnist", 0) == "T-shirt/top"
    assert class_name("cifar10", 1) == "automobile" and class_name("stl10", 2) == "car"
    assert class_name("mnist5k", 7) == "7"  # digits are their own names
    assert class_name("stl10u", -1) == "-1"  # STL-10's unlabeled images
