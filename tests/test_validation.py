"""Each great-expectations suite passes clean artefacts and catches a corrupted one,
naming the expectation and the offending values."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pucl.validation import ValidationFailed, enforce, suites

RNG = np.random.default_rng(0)


def _images(n: int) -> np.ndarray:
    return RNG.integers(0, 256, size=(n, 1, 8, 8), dtype=np.uint8)


def _failed(report) -> dict[str, list]:
    return {f"{r.expectation}:{r.column}": r.unexpected for r in report.failures}


def test_raw_data_suite():
    x_tr, x_te = _images(40), _images(10)
    y_tr, y_te = np.arange(40) % 10, np.arange(10) % 10
    assert suites.raw_data(x_tr, y_tr, x_te, y_te, range(10), (1, 8, 8)).success

    bad_labels = y_tr.copy()
    bad_labels[3] = 11
    report = suites.raw_data(x_tr, bad_labels, x_te, y_te, range(10), (1, 8, 8))
    assert _failed(report) == {"ExpectColumnValuesToBeInSet:label": [11]}

    floats = x_tr.astype(np.float32)
    floats[0, 0, 0, 0] = np.nan
    failed = _failed(suites.raw_data(floats, y_tr, x_te, y_te, range(10), (1, 8, 8)))
    assert "ExpectColumnValuesToBeBetween:non_finite" in failed
    assert failed["ExpectColumnValuesToBeInSet:dtype"][0] == "float32"

    missing_class = np.where(y_tr == 7, 6, y_tr)
    failed = _failed(suites.raw_data(x_tr, missing_class, x_te, y_te, range(10), (1, 8, 8)))
    assert set(failed) == {"ExpectColumnDistinctValuesToContainSet:label"}


def _split():
    x_tr, x_te = _images(60), _images(20)
    y = np.array([1, 0] * 30)
    pu = np.zeros(60, dtype=int)
    pu[np.flatnonzero(y == 1)[:10]] = 1
    train = pd.DataFrame({"index": np.arange(60), "split": "train", "pu": pu,
                          "in_u": True, "y": y})
    test = pd.DataFrame({"index": np.arange(20), "split": "test", "pu": 0, "in_u": False,
                         "y": np.arange(20) % 2})
    manifest = pd.concat([train, test], ignore_index=True)
    summary = {"gamma": 10 / 60, "prior_u_true": 0.5}
    return manifest, summary, x_tr, x_te


def test_pu_split_suite_passes_a_clean_split():
    manifest, summary, x_tr, x_te = _split()
    assert suites.pu_split(manifest, summary, x_tr, x_te, 10, None, 0.02).success
    assert suites.pu_split(manifest, summary, x_tr, x_te, 10, 0.5, 0.02).success


def test_pu_split_suite_catches_test_rows_leaked_into_training():
    manifest, summary, x_tr, x_te = _split()
    x_tr = x_tr.copy()
    x_tr[5] = x_te[2]  # one test image also sits in the training data
    report = suites.pu_split(manifest, summary, x_tr, x_te, 10, None, 0.02)
    assert not report.success
    failed = _failed(report)
    assert list(failed) == ["ExpectColumnValuesToBeNull:also_in_training"]
    assert len(failed["ExpectColumnValuesToBeNull:also_in_training"]) == 1
    with pytest.raises(ValidationFailed, match="test images also in the training split"):
        enforce(report)


def test_pu_split_suite_catches_negatives_labelled_and_wrong_summary():
    manifest, summary, x_tr, x_te = _split()
    manifest.loc[1, "pu"] = 1  # a negative among the labelled positives
    failed = _failed(suites.pu_split(manifest, {**summary, "gamma": 0.5}, x_tr, x_te, 10, 0.3,
                                     0.02))
    assert failed.keys() == {"ExpectColumnValuesToBeInSet:y", "ExpectTableRowCountToEqual:None",
                             "ExpectColumnValuesToBeBetween:gamma_reported",
                             "ExpectColumnMeanToBeBetween:y"}
    assert failed["ExpectColumnValuesToBeInSet:y"] == [0]


def test_features_suite():
    z = RNG.normal(size=(50, 16)).astype(np.float32)
    assert suites.features(z, 16, 1e-8).success
    nan = z.copy()
    nan[3, 5] = np.nan
    report = suites.features(nan, 16, 1e-8)
    assert _failed(report) == {"ExpectColumnValuesToBeBetween:non_finite": [1]}
    assert "NaN/inf features" in report.one_line() and "offending values [1]" in report.one_line()
    collapsed = np.ones_like(z)
    assert "ExpectColumnValuesToBeBetween:variance" in _failed(suites.features(collapsed, 16,
                                                                               1e-8))
    assert "ExpectTableRowCountToEqual:None" in _failed(suites.features(z, 84, 1e-8))


def test_pseudo_label_suite():
    train = pd.DataFrame({"index": np.arange(10), "pu": [1, 1, 0, 0, 0, 0, 0, 0, 0, 0]})
    labels = pd.DataFrame({"index": np.arange(10),
                           "pseudo_label": [1, 1, 1, 0, 0, 1, 0, 0, 1, 0]})
    assert suites.pseudo_labels(train, labels, (0.05, 0.95)).success
    all_positive = labels.assign(pseudo_label=1)
    report = suites.pseudo_labels(train, all_positive, (0.05, 0.95))
    assert _failed(report) == {"ExpectColumnMeanToBeBetween:pseudo_label": []}
    assert "observed 1" in report.one_line()
    flipped = labels.copy()
    flipped.loc[0, "pseudo_label"] = 0
    assert "ExpectColumnValuesToBeInSet:pseudo_label" in _failed(
        suites.pseudo_labels(train, flipped, (0.05, 0.95)))
    duplicated = pd.concat([labels.iloc[:9], labels.iloc[[8]]], ignore_index=True)
    failed = _failed(suites.pseudo_labels(train, duplicated, (0.05, 0.95)))
    assert {"ExpectColumnValuesToBeUnique:index",
            "ExpectColumnValuesToNotBeNull:pseudo_label"} <= failed.keys()


def test_metrics_suite():
    good = {"accuracy": 0.9, "f1": 0.9, "precision": 0.8, "recall": 1.0, "roc_auc": 0.95,
            "prior_abs_error": 0.01, "n_test": 1000}
    assert suites.metrics(good).success
    report = suites.metrics({**good, "accuracy": 1.5})
    assert _failed(report) == {"ExpectColumnValuesToBeBetween:value": [
        {"metric": "accuracy", "value": 1.5}]}
    assert "offending values [metric=accuracy value=1.5]" in report.one_line()
    missing = {k: v for k, v in good.items() if k != "roc_auc"}
    assert "ExpectColumnDistinctValuesToContainSet:metric" in _failed(suites.metrics(missing))
    # roc_auc is undefined with one class in the test set; accuracy never is
    assert suites.metrics({**good, "roc_auc": float("nan")}).success
    undefined = _failed(suites.metrics({**good, "f1": None, "prior_abs_error": 2.0}))
    assert undefined.keys() == {"ExpectColumnValuesToBeBetween:value",
                                "ExpectColumnValuesToNotBeNull:value"}
    assert undefined["ExpectColumnValuesToBeBetween:value"] == [
        {"metric": "prior_abs_error", "value": 2.0}]
    assert [row["metric"] for row in undefined["ExpectColumnValuesToNotBeNull:value"]] == ["f1"]
    # without labelled test rows the validation estimates are what must be there
    estimated = {"val_est_accuracy": 0.9, "val_est_auc": 0.9, "val_est_f1": 0.8}
    assert suites.metrics(estimated, labelled=False).success
    assert not suites.metrics({"val_est_accuracy": 0.9}, labelled=False).success


def test_each_suite_reads_the_frame_it_is_given():
    """The process keeps one batch definition per frame name (pucl.validation.engine): a
    suite still reads the rows it is handed, not those of an earlier suite."""
    from pucl.validation.engine import Check, run_suite

    checks = [Check("ExpectColumnValuesToBeBetween", "rows",
                    {"column": "a", "min_value": 0, "max_value": 1}),
              Check("ExpectTableRowCountToEqual", "rows", {"value": 3})]
    clean = pd.DataFrame({"a": [0, 1, 0]})
    assert run_suite("s", {"rows": clean}, checks).success
    report = run_suite("s", {"rows": pd.DataFrame({"a": [0, 5, 1, 7]})}, checks)
    assert _failed(report) == {"ExpectColumnValuesToBeBetween:a": [5, 7],
                               "ExpectTableRowCountToEqual:None": []}
    assert [r.observed for r in report.results][1] == 4
    assert run_suite("s", {"rows": clean}, checks).success
