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


def test_the_final_table_reads_results_then_estimates_then_diagnostics():
    from pucl.reporting.tables import metric_sections

    metrics = {"val_true_accuracy": 0.9, "kmeans_potential": 12.5, "accuracy": 0.95,
               "val_est_accuracy": 0.93, "val_est_accuracy_low": 0.9,
               "val_est_accuracy_high": 0.96, "roc_auc": 0.99, "prior_estimate": 0.31,
               "n_test": 100, "val_est_f1": 0.8}  # no interval for f1
    sections = metric_sections(metrics)
    assert [title for title, _ in sections] == ["test results", "from P and U alone",
                                                "diagnostics"]
    rows = dict(sections)
    assert rows["test results"] == [("accuracy", "0.9500"), ("roc_auc", "0.9900")]
    assert rows["from P and U alone"] == [("val_est_accuracy", "0.9300 [0.900, 0.960]"),
                                          ("val_est_f1", "0.8000"),
                                          ("prior_estimate", "0.3100")]
    assert rows["diagnostics"] == [("kmeans_potential", "12.5000"), ("n_test", "100"),
                                   ("val_true_accuracy", "0.9000")]
    # every entry once: the intervals live beside their estimate
    names = [n for _, part in sections for n, _ in part]
    assert sorted(names + ["val_est_accuracy_low", "val_est_accuracy_high"]) == sorted(metrics)


def test_a_run_without_labels_or_estimates_shows_only_what_it_has():
    from pucl.reporting.tables import metric_sections

    assert metric_sections({"prior_estimate": 0.4}) == [
        ("from P and U alone", [("prior_estimate", "0.4000")])]
