"""The evaluate stage's files beside metrics.json: the ROC (csv and png), the embedding
map, and the test errors by original class (csv and png), each written atomically."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.decomposition import PCA
from sklearn.manifold import TSNE

from pucl.data.catalog import class_name
from pucl.evaluation.metrics import classification_metrics, errors_by_class, roc_points
from pucl.io import save_figure, write_table
from pucl.models.features import embed
from pucl.reporting.figures import class_errors_figure, embedding_figure, note_figure, roc_figure

CLASS_ERROR_COLUMNS = ["class", "name", "label", "rows", "errors", "error_rate",
                       "share_of_errors"]


def write_roc(directory: Path, y: np.ndarray, score: np.ndarray, title: str = "test ROC",
              axes: tuple[str, str] = ("false positive rate", "true positive rate")) -> None:
    roc = roc_points(y, score)
    write_table(directory / "roc.csv", pd.DataFrame(roc))
    save_figure(directory / "roc.png",
                roc_figure(roc, classification_metrics(y, score)["roc_auc"], title, axes))


VALIDATION_SCORE_COLUMNS = ["index", "pu", "in_u", "score"]


def write_validation_scores(directory: Path, val: pd.DataFrame, score: np.ndarray | None
                            ) -> None:
    """The classifier's score of each validation row (dataset index, labelled or not, in
    U or not): what a paired comparison of two runs on the same split reads
    (pucl.evaluation.paired). No validation part: the columns and no row."""
    table = (pd.DataFrame(columns=VALIDATION_SCORE_COLUMNS) if score is None else
             pd.DataFrame({"index": val["index"].to_numpy(), "pu": val["pu"].to_numpy(),
                           "in_u": val["in_u"].to_numpy(), "score": score}))
    write_table(directory / "validation_scores.csv", table)


def write_class_errors(directory: Path, dataset: str, classes: np.ndarray | None,
                       y: np.ndarray | None = None, score: np.ndarray | None = None,
                       accuracy: float | None = None) -> None:
    """Which original classes (digits, garments) the binary task's mistakes come from;
    with no classes (P and U alone: none is known) an empty table and a note."""
    if classes is None:
        write_table(directory / "errors_by_class.csv", pd.DataFrame(columns=CLASS_ERROR_COLUMNS))
        save_figure(directory / "errors_by_class.png", note_figure(
            "no labelled test rows: no class is known", "errors by class"))
        return
    table = pd.DataFrame(errors_by_class(classes, y, (score >= 0.5).astype(np.int64)))
    table.insert(1, "name", [class_name(dataset, int(c)) for c in table["class"]])
    write_table(directory / "errors_by_class.csv", table)
    save_figure(directory / "errors_by_class.png", class_errors_figure(table, accuracy))


def embedding_points(n: int, count: int, seed: int) -> np.ndarray:
    """The seeded sample of `count` of `n` rows the embedding map and its diagnostics use."""
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n, size=min(count, n), replace=False))


def write_embedding(directory: Path, method: str, seed: int, features: np.ndarray,
                    y: np.ndarray, score: np.ndarray,
                    known: tuple[str, str, str] = ("true label", "negative", "positive"),
                    rows: str = "test") -> None:
    """The 2-d map (`method`: tsne | pca) of the rows' encoder features, by what is known
    of them and by the classifier's prediction."""
    if method == "tsne":
        points = TSNE(n_components=2, init="pca", random_state=seed,
                      perplexity=min(30.0, (len(features) - 1) / 3)).fit_transform(features)
    else:
        points = PCA(n_components=2, random_state=seed).fit_transform(features)
    save_figure(directory / "embedding.png",
                embedding_figure(points, y, (score >= 0.5).astype(int),
                                 f"{method} of {rows} encoder features", known))


def write_label_free_files(directory: Path, settings, seed: int, dataset: str, model,
                           x_val: np.ndarray, val: pd.DataFrame, score: np.ndarray,
                           device) -> None:
    """Without labelled test rows, the same files from the validation part: the ROC of
    held-out P against held-out U (its AUC is (1 - pi) AUC(P vs N) + pi / 2), the
    embedding map by what is known (labelled or not), and a class-error table with no
    rows (no class is known). `settings`: the evaluate section."""
    labelled, in_u = val["pu"].to_numpy() == 1, val["in_u"].to_numpy()
    write_roc(directory, np.r_[np.ones(labelled.sum()), np.zeros(in_u.sum())].astype(np.int64),
              np.r_[score[labelled], score[in_u]], "validation P vs U ROC",
              ("share of U scored positive", "share of P scored positive"))
    pick = embedding_points(len(val), settings.embedding_points, seed)
    write_embedding(directory, settings.embedding, seed,
                    embed(model, x_val[pick], "encoder", device),
                    labelled[pick].astype(np.int64), score[pick],
                    ("labelled", "unlabeled", "labelled positive"), "validation")
    write_class_errors(directory, dataset, None)
