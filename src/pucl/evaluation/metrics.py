"""Evaluation metrics and oracle diagnostics."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.metrics import (
    accuracy_score,
    f1_score,
    precision_score,
    recall_score,
    roc_auc_score,
    roc_curve,
)

from pucl.classify.neighbours import nearest_rows


def classification_metrics(y_true: np.ndarray, score: np.ndarray, threshold: float = 0.5) -> dict:
    """Binary metrics of the positive class; `score` is P(y = 1)."""
    pred = (score >= threshold).astype(np.int64)
    both = len(np.unique(y_true)) == 2
    return {
        "accuracy": float(accuracy_score(y_true, pred)),
        "f1": float(f1_score(y_true, pred, zero_division=0)),
        "precision": float(precision_score(y_true, pred, zero_division=0)),
        "recall": float(recall_score(y_true, pred, zero_division=0)),
        "roc_auc": float(roc_auc_score(y_true, score)) if both else float("nan"),
    }


def roc_points(y_true: np.ndarray, score: np.ndarray) -> dict[str, np.ndarray]:
    fpr, tpr, thresholds = roc_curve(y_true, score)
    return {"fpr": fpr, "tpr": tpr, "threshold": thresholds}


def errors_by_class(classes: np.ndarray, y_true: np.ndarray, y_pred: np.ndarray) -> dict:
    """Per original class of the test rows (digit, garment, ...): its binary label, rows,
    mistakes, error rate and share of all mistakes, as columns of equal length, classes
    in ascending order. Shows which classes a binary task's errors come from."""
    values = np.unique(classes)
    wrong = y_pred != y_true
    rows = np.array([(classes == c).sum() for c in values])
    errors = np.array([wrong[classes == c].sum() for c in values])
    majority = [int(y_true[classes == c].mean() >= 0.5) for c in values]  # one label each
    return {"class": values, "label": np.array(majority),
            "rows": rows, "errors": errors, "error_rate": errors / rows,
            "share_of_errors": errors / max(int(wrong.sum()), 1)}


def knn_accuracy(
    train_features: np.ndarray,
    train_labels: np.ndarray,
    test_features: np.ndarray,
    test_labels: np.ndarray,
    k: int = 20,
    device: torch.device | None = None,
) -> float:
    """Oracle diagnostic: kNN (cosine) accuracy of frozen features with true labels. Each
    test row takes the majority label of its k nearest training rows (a tie goes to the
    smaller label), searched exactly on `device` (default: the CPU)."""
    classes, codes = np.unique(train_labels, return_inverse=True)

    def unit(features: np.ndarray) -> torch.Tensor:
        rows = torch.as_tensor(np.asarray(features, dtype=np.float32), device=device)
        return F.normalize(rows.reshape(len(rows), -1), dim=1)  # zero rows stay zero

    nearest = nearest_rows(unit(test_features), unit(train_features),
                           min(k, len(codes))).cpu().numpy()
    votes = np.zeros((len(nearest), len(classes)), dtype=np.int64)
    np.add.at(votes, (np.arange(len(nearest))[:, None], codes[nearest]), 1)
    return float((classes[votes.argmax(axis=1)] == np.asarray(test_labels)).mean())


def prototype_bias(views: np.ndarray, labels: np.ndarray) -> float:
    """Oracle diagnostic, paper 002 eq. 16: E_(x0, y0) || E_{T, X | y0} f(T(X)) - E_T f(T(x0)) ||.

    views: [n, k, d] representations of k augmentations of n samples; labels: [n] true
    classes. The class prototype averages every view of the class; the surrogate
    prototype of a sample averages its own views. Small when augmentations of one sample
    already cover its class."""
    views = np.asarray(views, dtype=np.float64)
    labels = np.asarray(labels)
    if views.ndim != 3 or len(views) != len(labels):
        raise ValueError(f"views must be [n, k, d] with n = len(labels), got {views.shape}")
    own = views.mean(axis=1)
    gaps = np.empty(len(own))
    for c in np.unique(labels):
        members = labels == c
        gaps[members] = np.linalg.norm(own[members].mean(axis=0) - own[members], axis=1)
    return float(gaps.mean())


def prior_metrics(estimate: float, truth: float | None, halfwidth: float | None = None
                  ) -> dict[str, float]:
    """The prior used; its 95% interval where the estimator measured its spread
    (`prior_estimate_low` / `_high`, inside [0, 1]); the true prior and the error where
    U's labels are known."""
    out = {"prior_estimate": estimate}
    if halfwidth is not None:
        out.update(prior_estimate_low=max(estimate - halfwidth, 0.0),
                   prior_estimate_high=min(estimate + halfwidth, 1.0))
    if truth is not None:
        out.update(prior_true=truth, prior_abs_error=abs(estimate - truth))
    return out
