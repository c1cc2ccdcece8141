"""The data contracts between stages, as great-expectations suites in code.

Each function turns arrays or tables into small pandas frames (per row, per dimension or
one summary row) plus the expectations they must meet, and runs them. They return the
report; `enforce` turns a failed one into a one-line error.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import pandas as pd

from pucl.validation.engine import Check, SuiteReport, run_suite

REQUIRED_METRICS = ("accuracy", "f1", "precision", "recall", "roc_auc")
# ... and where the data has no labelled test rows: the label-free validation estimates
ESTIMATED_METRICS = ("val_est_accuracy", "val_est_auc", "val_est_f1")
BOUNDED_METRICS = ("accuracy", "accuracy_unsmoothed", "f1", "precision", "recall", "roc_auc",
                   "prior_estimate", "prior_estimate_low", "prior_estimate_high", "prior_true",
                   "prior_abs_error", "pseudo_label_accuracy",
                   "knn_accuracy", "knn_accuracy_inputs", *ESTIMATED_METRICS)
# ... of which these are defined whenever the test set has rows (roc_auc needs both classes)
DEFINED_METRICS = ("accuracy", "f1", "precision", "recall")


def _image_rows(x: np.ndarray, y: np.ndarray, split: str) -> pd.DataFrame:
    flat = x.reshape(len(x), int(np.prod(x.shape[1:])))  # -1 fails on zero rows
    as_float = flat.astype(np.float64, copy=False)
    return pd.DataFrame({
        "row": np.arange(len(x)), "split": split, "label": y,
        "dtype": str(x.dtype), "shape": "x".join(map(str, x.shape[1:])),
        "pixel_min": as_float.min(axis=1) if flat.size else np.zeros(len(x)),
        "pixel_max": as_float.max(axis=1) if flat.size else np.zeros(len(x)),
        "non_finite": (~np.isfinite(as_float)).sum(axis=1) if flat.size else np.zeros(len(x)),
    })


def raw_data(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray,
             y_test: np.ndarray, classes: Sequence[int] | None,
             image_shape: Sequence[int] | None) -> SuiteReport:
    """Loaded data: uint8 images in [0, 255] (or float32 features), the declared shape,
    finite, labels among the dataset's classes, every class present in training data, row
    ids unique. Bring-your-own data (classes and shape None) has binary labels with -1 for
    unknown, at least one positive, and one shape for train and test; its test split may
    be empty (P and U only: the validation estimates evaluate it)."""
    frames = {"train": _image_rows(x_train, y_train, "train"),
              "test": _image_rows(x_test, y_test, "test")}
    shape = "x".join(map(str, image_shape if image_shape is not None else x_train.shape[1:]))
    allowed = sorted(classes) if classes is not None else [-1, 0, 1]
    required = sorted(classes) if classes is not None else [1]
    images = x_train.ndim == 4
    checks = []
    for name in frames:
        checks += [
            Check("ExpectTableRowCountToBeBetween", name,
                  {"min_value": 0 if name == "test" and classes is None else 1},
                  "rows present"),
            Check("ExpectColumnValuesToBeInSet", name, {"column": "dtype",
                                                        "value_set": ["uint8" if images
                                                                      else "float32"]}),
            Check("ExpectColumnValuesToBeInSet", name, {"column": "shape",
                                                        "value_set": [shape]}),
            Check("ExpectColumnValuesToBeBetween", name, {"column": "non_finite",
                                                          "min_value": 0, "max_value": 0},
                  "NaN/inf pixels"),
            Check("ExpectColumnValuesToBeInSet", name, {"column": "label",
                                                        "value_set": allowed},
                  "labels of the dataset's classes"),
            Check("ExpectColumnValuesToBeUnique", name, {"column": "row"}),
        ]
        if images:
            checks += [
                Check("ExpectColumnValuesToBeBetween", name, {"column": "pixel_min",
                                                              "min_value": 0}),
                Check("ExpectColumnValuesToBeBetween", name, {"column": "pixel_max",
                                                              "max_value": 255}),
            ]
    checks.append(Check("ExpectColumnDistinctValuesToContainSet", "train",
                        {"column": "label", "value_set": required},
                        "every class present"))
    return run_suite("raw_data", frames, checks)


def image_digest(images: np.ndarray) -> list[str]:
    """Content hash per image, to find the same image on both sides of a split."""
    flat = np.ascontiguousarray(images.reshape(len(images), int(np.prod(images.shape[1:]))))
    return [hashlib.blake2b(row.tobytes(), digest_size=8).hexdigest() for row in flat]


def also_in(digests: list[str], others: set[str]) -> list[str | None]:
    """Each digest that `others` holds too, None for the rest: a column the contract wants
    all null, whose offending values name the shared images. (GX's own not-in-set check
    takes seconds per thousand set members; a set lookup here takes none.)"""
    return [d if d in others else None for d in digests]


def pu_split(manifest: pd.DataFrame, summary: dict, train_images: np.ndarray,
             test_images: np.ndarray, n_p: int, requested_prior: float | None,
             prior_tolerance: float) -> SuiteReport:
    """The PU split: labelled positives are true positives, train, val and test share no
    image, n_p as asked (over train and val), U's prior and gamma as the summary reports
    them (of the training part)."""
    pu_rows = manifest[manifest["split"] != "test"]  # train and the validation part
    train = manifest[manifest["split"] == "train"]
    test = manifest[manifest["split"] == "test"]
    in_u = train[train["in_u"]]
    n_u = len(in_u)
    train_hashes = set(image_digest(train_images))
    frames = {
        "manifest": manifest[["split"]],
        "labelled": pu_rows.loc[pu_rows["pu"] == 1, ["index", "y"]],
        "train": pu_rows[["index", "pu", "y"]],
        "unlabelled": in_u[["index", "y"]],
        "test": pd.DataFrame({"index": test["index"].to_numpy(),
                              "also_in_training": also_in(image_digest(test_images),
                                                          train_hashes)}),
        "summary": pd.DataFrame([{
            "gamma_reported": float(summary.get("gamma", np.nan)),
            "gamma_from_rows": (int(train["pu"].sum()) / n_u) if n_u else np.inf,
            "prior_u_reported": float(summary.get("prior_u_true", np.nan)),
            "prior_u_from_rows": (float(in_u["y"].mean())
                                  if n_u and (in_u["y"] >= 0).all() else np.nan),
        }]),
    }
    s = frames["summary"].iloc[0]
    checks = [
        Check("ExpectColumnValuesToBeInSet", "manifest",
              {"column": "split", "value_set": ["train", "val", "test"]}, "known parts"),
        Check("ExpectColumnValuesToBeInSet", "labelled", {"column": "y", "value_set": [1]},
              "labelled positives are true positives"),
        Check("ExpectTableRowCountToEqual", "labelled", {"value": n_p}, "n_p as asked"),
        Check("ExpectColumnValuesToBeUnique", "train", {"column": "index"},
              "a row in train or val, once"),
        Check("ExpectTableRowCountToBeBetween", "unlabelled", {"min_value": 1}, "U not empty"),
        Check("ExpectColumnValuesToBeUnique", "test", {"column": "index"}),
        Check("ExpectColumnValuesToBeNull", "test", {"column": "also_in_training"},
              "test images also in the training split"),
        Check("ExpectColumnValuesToBeBetween", "summary",
              {"column": "gamma_reported", "min_value": s["gamma_from_rows"] - 1e-9,
               "max_value": s["gamma_from_rows"] + 1e-9}, "gamma = n_p / n_u"),
    ]
    if np.isfinite(s["prior_u_from_rows"]):  # unknown when a row of U has no label
        checks.append(Check("ExpectColumnValuesToBeBetween", "summary",
                            {"column": "prior_u_reported",
                             "min_value": s["prior_u_from_rows"] - 1e-9,
                             "max_value": s["prior_u_from_rows"] + 1e-9},
                            "prior of U as reported"))
    if requested_prior is not None:
        checks.append(Check("ExpectColumnMeanToBeBetween", "unlabelled",
                            {"column": "y", "min_value": requested_prior - prior_tolerance,
                             "max_value": requested_prior + prior_tolerance},
                            "prior of U as requested"))
    return run_suite("pu_split", frames, checks)


# a feature dimension whose variance is below this has collapsed (float32 features of
# unit-norm projections vary by far more when they carry anything)
VARIANCE_FLOOR = 1e-8


def features(z: np.ndarray, expected_dim: int,
             variance_floor: float = VARIANCE_FLOOR) -> SuiteReport:
    """Embeddings: finite, the expected dimension, not collapsed (every dimension varies)."""
    z = np.asarray(z, dtype=np.float64)
    finite = np.isfinite(z)
    safe = np.where(finite, z, 0.0)
    frames = {"dimensions": pd.DataFrame({
        "dim": np.arange(z.shape[1]) if z.ndim == 2 else np.arange(0),
        "non_finite": (~finite).sum(axis=0) if z.ndim == 2 else [],
        "variance": safe.var(axis=0) if z.ndim == 2 and len(z) else np.zeros(z.shape[-1]),
    })}
    checks = [
        Check("ExpectTableRowCountToEqual", "dimensions", {"value": expected_dim},
              "feature dimension"),
        Check("ExpectColumnValuesToBeBetween", "dimensions",
              {"column": "non_finite", "min_value": 0, "max_value": 0}, "NaN/inf features"),
        Check("ExpectColumnValuesToBeBetween", "dimensions",
              {"column": "variance", "min_value": variance_floor},
              "collapsed dimensions (variance below the floor)"),
    ]
    return run_suite("features", frames, checks)


def pseudo_labels(train: pd.DataFrame, labels: pd.DataFrame,
                  positive_band: tuple[float, float]) -> SuiteReport:
    """PUPL output: every training row labelled exactly once, with 0 or 1, labelled positives
    labelled positive, and the positive fraction inside the configured band."""
    joined = train[["index", "pu"]].merge(labels, on="index", how="left")
    frames = {
        "labels": labels[["index", "pseudo_label"]],
        "coverage": joined[["index", "pseudo_label"]],
        "labelled": joined.loc[joined["pu"] == 1, ["index", "pseudo_label"]],
    }
    checks = [
        Check("ExpectColumnValuesToBeUnique", "labels", {"column": "index"},
              "each row labelled once"),
        Check("ExpectTableRowCountToEqual", "labels", {"value": len(train)},
              "one label per training row"),
        Check("ExpectColumnValuesToNotBeNull", "coverage", {"column": "pseudo_label"},
              "training rows without a label"),
        Check("ExpectColumnValuesToBeInSet", "labels",
              {"column": "pseudo_label", "value_set": [0, 1]}),
        Check("ExpectColumnValuesToBeInSet", "labelled",
              {"column": "pseudo_label", "value_set": [1]}, "labelled positives positive"),
        Check("ExpectColumnMeanToBeBetween", "labels",
              {"column": "pseudo_label", "min_value": positive_band[0],
               "max_value": positive_band[1]}, "positive fraction in the sane band"),
    ]
    return run_suite("pseudo_labels", frames, checks)


def metrics(values: dict, labelled: bool = True) -> SuiteReport:
    """Test metrics (or, without labelled test rows, the validation estimates): present,
    finite where defined, and in [0, 1]."""
    # One row per metric: three expectations, however many metrics (one per metric cost
    # GX about 20 ms each); an offending row is named by its metric. A NaN (roc_auc with
    # one class) is skipped by the bounds, as GX skips missing values.
    present = [m for m in BOUNDED_METRICS if m in values]
    rows = pd.DataFrame({"metric": present,
                         "value": pd.Series([values[m] for m in present], dtype="float64")})
    frames = {"metrics": rows, "defined": rows[rows["metric"].isin(DEFINED_METRICS)]}
    checks = [
        Check("ExpectColumnValuesToBeBetween", "metrics",
              {"column": "value", "min_value": 0.0, "max_value": 1.0}, "a share in [0, 1]"),
        Check("ExpectColumnDistinctValuesToContainSet", "metrics",
              {"column": "metric",
               "value_set": list(REQUIRED_METRICS if labelled else ESTIMATED_METRICS)},
              "required metrics present"),
        Check("ExpectColumnValuesToNotBeNull", "defined", {"column": "value"},
              "defined on any test set"),
    ]
    return run_suite("metrics", frames, checks,
                     index={"metrics": ["metric"], "defined": ["metric"]})


def batch(x: np.ndarray, pu: np.ndarray, y: np.ndarray, shape: Sequence[int], dtype: str,
          holdout: np.ndarray) -> SuiteReport:
    """An arriving batch of the tracked dataset (`pucl data add`): rows present, the
    dataset's dtype and shape, finite values in range, pu in {0, 1}, y in {-1, 0, 1} and 1
    on every labelled positive, and no row equal to a holdout row (arriving data never
    enters the frozen holdout, so the scores on it stay comparable)."""
    rows = _image_rows(x, y, "batch").assign(
        pu=pu, also_in_holdout=also_in(image_digest(x), set(image_digest(holdout))))
    images = x.ndim == 4
    checks = [
        Check("ExpectTableRowCountToBeBetween", "batch", {"min_value": 1}, "rows present"),
        Check("ExpectColumnValuesToBeInSet", "batch", {"column": "dtype", "value_set": [dtype]},
              "the dataset's dtype"),
        Check("ExpectColumnValuesToBeInSet", "batch",
              {"column": "shape", "value_set": ["x".join(map(str, shape))]},
              "the dataset's shape"),
        Check("ExpectColumnValuesToBeBetween", "batch", {"column": "non_finite",
                                                         "min_value": 0, "max_value": 0},
              "NaN/inf values"),
        Check("ExpectColumnValuesToBeInSet", "batch", {"column": "pu", "value_set": [0, 1]}),
        Check("ExpectColumnValuesToBeInSet", "batch", {"column": "label",
                                                       "value_set": [-1, 0, 1]}),
        Check("ExpectColumnValuesToBeNull", "batch", {"column": "also_in_holdout"},
              "rows also in the frozen holdout"),
    ]
    if images:
        checks += [Check("ExpectColumnValuesToBeBetween", "batch",
                         {"column": "pixel_min", "min_value": 0}),
                   Check("ExpectColumnValuesToBeBetween", "batch",
                         {"column": "pixel_max", "max_value": 255})]
    frames = {"batch": rows, "labelled": rows.loc[rows["pu"] == 1, ["label"]]}
    checks.append(Check("ExpectColumnValuesToBeInSet", "labelled",
                        {"column": "label", "value_set": [1]},
                        "labelled positives are positives"))
    return run_suite("batch", frames, checks)
