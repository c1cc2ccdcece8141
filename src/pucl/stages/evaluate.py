"""Stage evaluate: test metrics, label-free validation estimates, diagnostics, ROC curve,
embedding map and errors by class (every metric: docs/pipeline.md). Data without
labelled test rows (P and U only) gets the validation estimates alone, and the same
files drawn from the validation part (label_free_figures).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pucl.artifacts.models import classifier_features, load_classifier, load_models
from pucl.data.augment import make_augment, unit_scale
from pucl.errors import DataError
from pucl.evaluation.label_free import validation_metrics
from pucl.evaluation.metrics import classification_metrics, prior_metrics
from pucl.io import read_table, write_json
from pucl.models.features import embed
from pucl.recipe import Recipe
from pucl.recipe.diagnostics import ablation_metrics, oracle_metrics, representation_metrics
from pucl.recipe.prior import error_allowed, half_width
from pucl.recipe.scoring import member_scores, view_features
from pucl.recipe.served import served_classifier
from pucl.reporting.evaluation import (
    embedding_points,
    write_class_errors,
    write_embedding,
    write_label_free_files,
    write_roc,
    write_validation_scores,
)
from pucl.runtime.device import resolve_device
from pucl.stages._context import LABEL_COLUMNS, PRIOR_REPORT, StageContext
from pucl.validation import suites

NAME = "evaluate"
FILES = ("metrics.json", "roc.csv", "roc.png", "embedding.png", "errors_by_class.csv",
         "errors_by_class.png", "validation_scores.csv")


def run(ctx: StageContext) -> dict:
    p, recipe = ctx.params.evaluate, Recipe.of(ctx.params)
    train, test, val = (ctx.rows(part) for part in ("train", "test", "val"))
    data, device = ctx.data(), resolve_device(ctx.params.base.device)
    models = load_models(ctx.path("pretrain", "model.pt"))
    members = load_classifier(ctx.path("classifier", "head.pt"), models)
    reads = classifier_features(ctx.path("classifier", "head.pt"))  # encoder | trunk
    prior = ctx.read_json("prior", PRIOR_REPORT)
    metrics: dict = {}
    x_val, val_score = data.x_train[val["index"].to_numpy()], None
    if len(val):  # the classifier's own scores (every view, every member), as on the test
        val_score = member_scores([head for _, head in members], view_features(
            recipe, members, x_val, reads, device), device).mean(axis=(0, 1))
    elif "fold" in train:  # split.folds: build_split dealt the training rows into folds
        val, val_score = ctx.out_of_fold()  # every training row, scored out of its fold
        metrics["val_folds"] = int(train["fold"].max()) + 1
        x_val = data.x_train[val["index"].to_numpy()]
    if test.empty and val.empty:
        raise DataError("nothing to evaluate on: the split has no labelled test rows and no "
                        "validation part (allowed: split.val_fraction above 0, split.folds, "
                        "or data with x_test and y_test)")
    if len(val):
        in_u = val["in_u"].to_numpy()
        metrics.update(validation_metrics(
            val_score[val["pu"].to_numpy() == 1], val_score[in_u], float(prior["prior"]),
            error_allowed(p.prior_error, half_width(prior)), val["y"].to_numpy()[in_u],
            ctx.params.base.seed))
    metrics.update(**prior_metrics(prior["prior"], prior.get("prior_true"), half_width(prior)),
                   n_test=len(test),
                   kmeans_potential=ctx.read_json("pupl", "summary.json")["potential"])
    if len(test):
        x_eval = data.x_test[test["index"].to_numpy()]
        metrics.update(labelled_test(ctx, recipe, models, members, reads, device, data,
                                     train, test))
    else:  # P and U only: the same files, drawn from the validation part
        x_eval = x_val
        write_label_free_files(ctx.directory("evaluate"), p, ctx.params.base.seed,
                               ctx.params.data.dataset, models[0], x_val, val, val_score,
                               device)
    write_validation_scores(ctx.directory("evaluate"), val, val_score)
    ctx.validate(lambda: suites.metrics(metrics, labelled=len(test) > 0))
    write_json(ctx.path("evaluate", "metrics.json"), metrics)
    ctx.write_validation("evaluate")
    for name in FILES:
        ctx.run.log_artifact(ctx.path("evaluate", name))
    # the deployable classifier (encoders, heads, test-time views) with its signature
    ctx.run.log_pytorch_model(served_classifier(recipe, members, reads, x_eval.ndim == 4),
                              "classifier", unit_scale(x_eval[:8]).astype(np.float32))
    return metrics


def labelled_test(ctx: StageContext, recipe: Recipe, models, members, reads: str, device,
                  data, train: pd.DataFrame, test: pd.DataFrame) -> dict:
    """Metrics, diagnostics and figures on the labelled test rows."""
    p, out, seed = ctx.params.evaluate, ctx.directory("evaluate"), ctx.params.base.seed
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
    write_class_errors(out, ctx.params.data.dataset, data.y_test[test["index"].to_numpy()],
                       y_test, score, metrics["accuracy"])
    write_roc(out, y_test, score)
    pick = embedding_points(len(test), p.embedding_points, seed)
    write_embedding(out, p.embedding, seed, f_test[pick], y_test[pick], score[pick])
    metrics.update(representation_metrics(
        model, x_test[pick], y_test[pick], make_augment(ctx.params.pretrain.augment,
                                                        x_test.ndim == 2),
        p.prototype_views, seed, device))
    return metrics
