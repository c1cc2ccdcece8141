"""The pipeline's figures (matplotlib, Agg): pretraining loss, test ROC, errors by class and
the embedding map. Each function returns a figure; the stages save and log it."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402


def loss_figure(frames: Sequence[pd.DataFrame], seeds: Sequence[int], method: str, loss: str):
    """Pretraining loss per epoch, one line per encoder (labelled by its seed when several)."""
    fig, ax = plt.subplots(figsize=(5, 3.2))
    for seed, frame in zip(seeds, frames, strict=True):
        ax.plot(frame["epoch"], frame["loss"], marker=".",
                label=f"seed {seed}" if len(frames) > 1 else None)
    what = {"ncpu": "NcPU loss (eq. 14)", "ssc": "SSC loss (eq. 8)"}.get(method, f"{loss} loss")
    ax.set(xlabel="epoch", ylabel=what, title=f"{method} pretraining")
    if len(frames) > 1:
        ax.legend(title="encoder")
    ax.grid(alpha=0.3)
    return fig


def embedding_figure(points: np.ndarray, y_true: np.ndarray, y_pred: np.ndarray, title: str,
                     known: tuple[str, str, str] = ("true label", "negative", "positive")):
    """Two panels of the same points: by what is known of them (`known`: the panel's name,
    then the names of 0 and 1), and by the classifier's prediction."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.6), sharex=True, sharey=True)
    for ax, labels, names in ((axes[0], y_true, known),
                              (axes[1], y_pred, ("predicted", "negative", "positive"))):
        name = names[0]
        for value, colour, text in ((0, "tab:blue", names[1]), (1, "tab:red", names[2])):
            sel = labels == value
            ax.scatter(points[sel, 0], points[sel, 1], s=6, c=colour, alpha=0.6, label=text)
        ax.set_title(f"{title}: {name}")
        ax.set_xticks([])
        ax.set_yticks([])
    axes[0].legend(loc="best", markerscale=3)
    return fig


def roc_figure(roc: dict, auc: float, title: str = "test ROC",
               axes: tuple[str, str] = ("false positive rate", "true positive rate")):
    fig, ax = plt.subplots(figsize=(4.2, 4))
    ax.plot(roc["fpr"], roc["tpr"], label=f"AUC = {auc:.4f}")
    ax.plot([0, 1], [0, 1], ls="--", c="grey", lw=0.8)
    ax.set(xlabel=axes[0], ylabel=axes[1], title=title)
    ax.legend(loc="lower right")
    return fig


def class_errors_figure(table: pd.DataFrame, accuracy: float):
    fig, ax = plt.subplots(figsize=(5, 0.35 * len(table) + 1.2))
    colours = np.where(table["label"] == 1, "tab:red", "tab:blue")
    labels = [f"{c} {n}" if str(c) != n else n for c, n in zip(table["class"], table["name"],
                                                               strict=True)]
    ax.barh(labels, table["error_rate"], color=colours)
    for y, (rate, share) in enumerate(zip(table["error_rate"], table["share_of_errors"],
                                          strict=True)):
        ax.text(rate, y, f" {share:.0%} of errors", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set(xlabel="test error rate (red: positive class, blue: negative)",
           ylabel="original class", title=f"errors by class (accuracy {accuracy:.4f})")
    ax.set_xlim(0, max(0.05, float(table["error_rate"].max()) * 1.45))
    return fig


def note_figure(text: str, title: str):
    """A figure that says why there is nothing to draw (a declared output still exists)."""
    fig, ax = plt.subplots(figsize=(5, 1.6))
    ax.axis("off")
    ax.set_title(title)
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True)
    return fig
