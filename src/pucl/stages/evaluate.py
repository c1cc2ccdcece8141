"""Stage evaluate: test metrics, validation estimates, oracle diagnostics, ROC curve and
embedding map. Data without labelled test rows (P and U only) gets the validation
estimates alone, and the same files drawn from the validation part (label_free_figures).

`metrics.json`: accuracy, f1, precision, recall, roc_auc on the labelled test split;
val_est_accuracy, val_est_auc, val_est_f1 with their intervals: label-free estimates from
the validation part's held-out P and U and the pipeline's prior estimate
(pucl.evaluation.label_free.validation_metrics), beside val_true_* where U's labels are known
(and accuracy_unsmoothed, the head's own, when classifier.neighbours smooths it;
accuracy_one_view, the image alone, when evaluate.tta or evaluate.tta_shift average
other views in;
accuracy_one_member, the first encoder's classifier alone, when pretrain.members is
above 1; pucl.recipe.diagnostics);
prior_estimate / prior_true / prior_abs_error; and ORACLE diagnostics that read true
training labels, which the method never sees: pseudo_label_accuracy (PUPL labels vs the
truth on U) and knn_accuracy (kNN of frozen encoder features with true labels), beside
knn_accuracy_inputs, the same probe on the flattened inputs (evaluate.knn_inputs): the
number a representation has to beat to have learned anything the pixels did not show.
`errors_by_class.csv` / `.png`: the test error of each original class (digit, garment)
and its share of all mistakes, which shows where a binary task's errors come from.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.decomposition import PCA
from sklearn.manifold import TSNE

from pucl.artifacts import classifier_features, load_classifier, load_models
from pucl.data.augment import make_augment, unit_scale
from pucl.data.catalog import class_name
from pucl.errors import DataError
from pucl.evaluation.label_free import validation_metrics
from pucl.evaluation.metrics import classification_metrics, errors_by_class, roc_points
from pucl.io import read_table, save_figure, write_json, write_table
from pucl.models.features import embed
from pucl.recipe import Recipe
from pucl.recipe.diagnostics import ablation_metrics, oracle_metrics, representation_metrics
from pucl.recipe.scoring import member_scores, view_features
from pucl.recipe.served import served_classifier
from pucl.reporting.figures import class_errors_figure, embedding_figure, note_figure, roc_figure
from pucl.runtime.device import resolve_device
from pucl.stages._context import LABEL_COLUMNS, PRIOR_REPORT, StageContext
from pucl.validation import suites

NAME = "evaluate"
FILES = ("metrics.json", "roc.csv", "roc.png", "embedding.png", "errors_by_class.csv",
         "errors_by_class.png")


def run(ctx: StageContext) -> dict:
    p, recipe = ctx.params.evaluate, Recipe.of(ctx.params)
    manifest = ctx.manifest()
    train = manifest[manifest["split"] == "train"].reset_index(drop=True)
    test = manifest[manifest["split"] == "test"].reset_index(drop=True)
    val = manifest[manifest["split"] == "val"].reset_index(drop=True)
    if test.empty and val.empty:
        raise DataError("nothing to evaluate on: the split has no labelled test rows and no "
                        "validation part (allowed: split.val_fraction above 0, or data with "
                        "x_test and y_test)")
    data, device = ctx.data(), resolve_device(ctx.params.base.device)
    models = load_models(ctx.path("pretrain", "model.pt"))
    members = load_classifier(ctx.path("classifier", "head.pt"), models)
    reads = classifier_features(ctx.path("classifier", "head.pt"))  # encoder | trunk
    heads = [head for _, head in members]
    prior = ctx.read_json("prior", PRIOR_REPORT)
    metrics: dict = {}
    x_val = data.x_train[val["index"].to_numpy()]
    if len(val):  # the classifier's own scores (every view, every member), as on the test
        val_score = member_scores(heads, view_features(recipe, members, x_val, reads, device),
                                  device).mean(axis=(0, 1))
        in_u = val["in_u"].to_numpy()
        metrics.update(validation_metrics(
            val_score[val["pu"].to_numpy() == 1], val_score[in_u], float(prior["prior"]),
            p.prior_error, val["y"].to_numpy()[in_u], ctx.params.base.seed))
    metrics.update(prior_estimate=prior["prior"], n_test=len(test),
                   kmeans_potential=ctx.read_json("pupl", "summary.json")["potential"])
    if prior.get("prior_true") is not None:
        metrics.update(prior_true=prior["prior_true"],
                       prior_abs_error=abs(prior["prior"] - prior["prior_true"]))
    if len(test):
        x_eval = data.x_test[test["index"].to_numpy()]
        metrics.update(labelled_test(ctx, recipe, models, members, reads, device, data,
                                     train, test))
    else:  # P and U only: the same files, drawn from the validation part
        x_eval = x_val
        label_free_figures(ctx, models[0], x_val, val, val_score, device)
    ctx.validate(lambda: suites.metrics(metrics, labelled=len(test) > 0))
    write_json(ctx.path("evaluate", "metrics.json"), metrics)
    ctx.write_validation("evaluate")
    for name in FILES:
        ctx.run.log_artifact(ctx.path("evaluate", name))
    # the deployable classifier (encoders + heads, with the test-time views) as an MLflow
    # model with its signature
    ctx.run.log_pytorch_model(served_classifier(recipe, members, reads, x_eval.ndim == 4),
                              "classifier", unit_scale(x_eval[:8]).astype(np.float32))
    return metrics


def labelled_test(ctx: StageContext, recipe: Recipe, models, members, reads: str, device,
                  data, train: pd.DataFrame, test: pd.DataFrame) -> dict:
    """Metrics, diagnostics and figures on the labelled test rows."""
    p = ctx.params.evaluate
    x_test, y_test = data.x_test[test["index"].to_numpy()], test["y"].to_numpy().astype(np.int64)
    features = view_features(recipe, members, x_test, reads, device)
    heads = [head for _, head in members]
    scores = member_scores(heads, features, device)  # [member, view, row]
    score = scores.mean(axis=(0, 1))
    metrics = {**classification_metrics(y_test, score),
               **ablation_metrics(heads, features, scores, y_test, device)}
    # the diagnostics and the embedding map describe the first pretrained representation
    model, f_test = models[0], embed(models[0], x_test, "encoder", device)
    pseudo = train[["index"]].merge(read_table(ctx.path("pupl", "labels.parquet"),
                                               LABEL_COLUMNS), on="index", how="left")
    metrics.update(oracle_metrics(model, data.x_train[train["index"].to_numpy()],
                                  train["y"].to_numpy(), train["in_u"].to_numpy(),
                                  pseudo["pseudo_label"].to_numpy(), x_test, y_test, p.knn_k,
                                  p.knn_inputs, device, f_test))
    write_class_errors(ctx, data.y_test[test["index"].to_numpy()], y_test, score,
                       metrics["accuracy"])
    roc = roc_points(y_test, score)
    write_table(ctx.path("evaluate", "roc.csv"), pd.DataFrame(roc))
    save_figure(ctx.path("evaluate", "roc.png"), roc_figure(roc, metrics["roc_auc"]))
    pick = embedding_points(ctx, len(test))
    write_embedding(ctx, f_test[pick], y_test[pick], score[pick])
    metrics.update(representation_metrics(
        model, x_test[pick], y_test[pick], make_augment(ctx.params.pretrain.augment,
                                                        x_test.ndim == 2),
        p.prototype_views, ctx.params.pretrain.nonneg, ctx.params.base.seed, device))
    return metrics


def label_free_figures(ctx: StageContext, model, x_val: np.ndarray, val: pd.DataFrame,
                       score: np.ndarray, device) -> None:
    """Without labelled test rows: the ROC of held-out P against held-out U (its AUC is
    (1 - pi) AUC(P vs N) + pi / 2), the embedding map of the validation part by what is
    known (labelled or not), and a class-error table with no rows (no class is known)."""
    labelled, in_u = val["pu"].to_numpy() == 1, val["in_u"].to_numpy()
    truth = np.r_[np.ones(labelled.sum()), np.zeros(in_u.sum())].astype(np.int64)
    both = np.r_[score[labelled], score[in_u]]
    roc = roc_points(truth, both)
    write_table(ctx.path("evaluate", "roc.csv"), pd.DataFrame(roc))
    save_figure(ctx.path("evaluate", "roc.png"), roc_figure(
        roc, classification_metrics(truth, both)["roc_auc"], "validation P vs U ROC",
        ("share of U scored positive", "share of P scored positive")))
    pick = embedding_points(ctx, len(val))
    write_embedding(ctx, embed(model, x_val[pick], "encoder", device),
                    labelled[pick].astype(np.int64), score[pick],
                    ("labelled", "unlabeled", "labelled positive"), "validation")
    write_table(ctx.path("evaluate", "errors_by_class.csv"),
                pd.DataFrame(columns=["class", "name", "label", "rows", "errors",
                                      "error_rate", "share_of_errors"]))
    save_figure(ctx.path("evaluate", "errors_by_class.png"), note_figure(
        "no labelled test rows: no class is known", "errors by class"))


def write_class_errors(ctx: StageContext, classes: np.ndarray, y: np.ndarray,
                       score: np.ndarray, accuracy: float) -> None:
    """Which original classes (digits, garments) the binary task's mistakes come from."""
    table = pd.DataFrame(errors_by_class(classes, y, (score >= 0.5).astype(np.int64)))
    table.insert(1, "name", [class_name(ctx.params.data.dataset, int(c))
                             for c in table["class"]])
    write_table(ctx.path("evaluate", "errors_by_class.csv"), table)
    save_figure(ctx.path("evaluate", "errors_by_class.png"), class_errors_figure(table, accuracy))


def embedding_points(ctx: StageContext, n: int) -> np.ndarray:
    """The seeded sample of test rows the embedding map and its diagnostics use."""
    rng = np.random.default_rng(ctx.params.base.seed)
    return np.sort(rng.choice(n, size=min(ctx.params.evaluate.embedding_points, n),
                              replace=False))


def write_embedding(ctx: StageContext, features: np.ndarray, y: np.ndarray,
                    score: np.ndarray,
                    known: tuple[str, str, str] = ("true label", "negative", "positive"),
                    rows: str = "test") -> None:
    p, seed = ctx.params.evaluate, ctx.params.base.seed
    if p.embedding == "tsne":
        points = TSNE(n_components=2, init="pca", random_state=seed,
                      perplexity=min(30.0, (len(features) - 1) / 3)).fit_transform(features)
    else:
        points = PCA(n_components=2, random_state=seed).fit_transform(features)
    save_figure(ctx.path("evaluate", "embedding.png"),
                embedding_figure(points, y, (score >= 0.5).astype(int),
                                 f"{p.embedding} of {rows} encoder features", known))
