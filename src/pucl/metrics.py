"""Evaluation metrics and oracle diagnostics."""

from __future__ import annotations

import numpy as np
from sklearn.metrics import (
    accuracy_score,
    f1_score,
    precision_score,
    recall_score,
    roc_auc_score,
    roc_curve,
)
from sklearn.neighbors import KNeighborsClassifier


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


def knn_accuracy(
    train_features: np.ndarray,
    train_labels: np.ndarray,
    test_features: np.ndarray,
    test_labels: np.ndarray,
    k: int = 20,
) -> float:
    """Oracle diagnostic: kNN (cosine) accuracy of frozen features with true labels."""
    knn = KNeighborsClassifier(n_neighbors=min(k, len(train_labels)), metric="cosine")
    knn.fit(train_features, train_labels)
    return float((knn.predict(test_features) == test_labels).mean())
