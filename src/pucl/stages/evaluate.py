"""Stage evaluate: test metrics, oracle diagnostics, ROC curve and embedding map.

`metrics.json`: accuracy, f1, precision, recall, roc_auc on the labelled test split
(and accuracy_unsmoothed, the head's own, when classifier.neighbours smooths it;
accuracy_one_view, the image alone, when evaluate.tta or evaluate.tta_shift average
other views in;
accuracy_one_member, the first classifier alone, when pretrain.members or
classifier.members is above 1);
prior_estimate / prior_true / prior_abs_error; and ORACLE diagnostics that read true
training labels, which the method never sees: pseudo_label_accuracy (PUPL labels vs the
truth on U) and knn_accuracy (kNN of frozen encoder features with true labels), beside
knn_accuracy_inputs, the same probe on the flattened inputs (evaluate.knn_inputs): the
number a representation has to beat to have learned anything the pixels did not show.
`errors_by_class.csv` / `.png`: the test error of each original class (digit, garment)
and its share of all mistakes, which shows where a binary task's errors come from.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from sklearn.decomposition import PCA  # noqa: E402
from sklearn.manifold import TSNE  # noqa: E402

from pucl.artifacts import (  # noqa: E402
    classifier_features,
    load_classifier,
    load_models,
)
from pucl.classify.deployable import PUClassifier  # noqa: E402
from pucl.classify.neighbours import NeighbourHead  # noqa: E402
from pucl.data.augment import make_augment  # noqa: E402
from pucl.data.registry import class_name, unit_scale  # noqa: E402
from pucl.errors import DataError  # noqa: E402
from pucl.features import (  # noqa: E402
    augmented_projections,
    embed,
    encoder_part,
    input_features,
    raw_projections,
    scoring_views,
)
from pucl.io import read_table, save_figure, write_json, write_table
from pucl.metrics import (  # noqa: E402
    class_consistency,
    classification_metrics,
    errors_by_class,
    feature_sparsity,
    knn_accuracy,
    prototype_bias,
    roc_points,
)
from pucl.runtime import resolve_device, seeded_generator  # noqa: E402
from pucl.stages._context import LABEL_COLUMNS, PRIOR_REPORT, StageContext
from pucl.validation import suites  # noqa: E402

NAME = "evaluate"


def embedding_figure(points: np.ndarray, y_true: np.ndarray, y_pred: np.ndarray, title: str):
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.6), sharex=True, sharey=True)
    for ax, labels, name in ((axes[0], y_true, "true label"), (axes[1], y_pred, "predicted")):
        for value, colour, text in ((0, "tab:blue", "negative"), (1, "tab:red", "positive")):
            sel = labels == value
            ax.scatter(points[sel, 0], points[sel, 1], s=6, c=colour, alpha=0.6, label=text)
        ax.set_title(f"{title}: {name}")
        ax.set_xticks([])
        ax.set_yticks([])
    axes[0].legend(loc="best", markerscale=3)
    return fig


def roc_figure(roc: dict, auc: float):
    fig, ax = plt.subplots(figsize=(4.2, 4))
    ax.plot(roc["fpr"], roc["tpr"], label=f"AUC = {auc:.4f}")
    ax.plot([0, 1], [0, 1], ls="--", c="grey", lw=0.8)
    ax.set(xlabel="false positive rate", ylabel="true positive rate", title="test ROC")
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


def representation_diagnostics(ctx: StageContext, model, images: np.ndarray,
                               labels: np.ndarray, device) -> dict:
    """Oracle diagnostics of the pretrained representation on the embedding-map points:
    prototype representation bias (paper 002 eq. 16) of the projections under the
    pretraining augmentations; with non-negative projections (paper 004), their sparsity
    and per-dimension class consistency."""
    pre, out = ctx.params.pretrain, {}
    if ctx.params.evaluate.prototype_views > 0:
        views = augmented_projections(model, images, make_augment(pre.augment, images.ndim == 2),
                                      ctx.params.evaluate.prototype_views,
                                      seeded_generator(ctx.params.base.seed), device)
        out["prototype_bias"] = prototype_bias(views, labels)
    if pre.nonneg != "none":  # the loss sees relu(h(g(x))) in both modes
        features = np.maximum(raw_projections(model, images, device), 0.0)
        out["feature_sparsity"] = feature_sparsity(features)
        out["class_consistency"] = class_consistency(features, labels)
    return out


def run(ctx: StageContext) -> dict:
    p = ctx.params.evaluate
    seed = ctx.params.base.seed
    manifest = ctx.manifest()
    train = manifest[manifest["split"] == "train"].reset_index(drop=True)
    test = manifest[manifest["split"] == "test"].reset_index(drop=True)
    if test.empty:
        raise DataError("the split has no labelled test rows to evaluate on")
    data = ctx.data()
    device = resolve_device(ctx.params.base.device)
    models = load_models(ctx.path("pretrain", "model.pt"))
    model = models[0]  # the diagnostics describe the first pretrained representation
    members = load_classifier(ctx.path("classifier", "head.pt"), models)
    reads = classifier_features(ctx.path("classifier", "head.pt"))  # encoder | trunk
    x_test = data.x_test[test["index"].to_numpy()]
    # the kNN diagnostic and the embedding map describe the pretrained representation;
    # the test scores come from the classifier's own (maybe fine-tuned) encoders
    f_test = embed(model, x_test, "encoder", device)
    x_train = data.x_train[train["index"].to_numpy()]
    f_train = embed(model, x_train, "encoder", device)
    y_test = test["y"].to_numpy().astype(np.int64)
    # translations are for images; feature rows are scored as they are (like the image
    # augmentations, the default tta_shift does not apply to them)
    shift = p.tta_shift if x_test.ndim == 4 else 0
    # features[member][view]; views one at a time, so the test set is never held 18 times
    features = [[] for _ in members]
    for v, view in enumerate(scoring_views(x_test, p.tta == "hflip", shift)):
        for kept, (member, _) in zip(features, members, strict=True):
            kept.append(f_test if (member is model and reads == "encoder" and v == 0)
                        else embed(member, view, reads, device))
    n_views = len(features[0])
    heads = [head for _, head in members]
    # scores[member, view, row]; the classifier's is their mean over members and views
    scores = np.array([[head.positive_score(f) for f in fs] for head, fs in zip(heads, features,
                                                                                   strict=True)])
    score = scores.mean(axis=(0, 1))
    metrics = classification_metrics(y_test, score)
    if isinstance(heads[0], NeighbourHead):  # what the smoothing bought, on the same heads
        metrics["accuracy_unsmoothed"] = classification_metrics(y_test, np.mean(
            [[head.base.positive_score(f) for f in fs] for head, fs in zip(heads, features,
                                                                           strict=True)],
            axis=(0, 1)))["accuracy"]
    if n_views > 1:  # what the mirror and translated views bought
        metrics["accuracy_one_view"] = classification_metrics(
            y_test, scores[:, 0].mean(axis=0))["accuracy"]
    if len(members) > 1:  # what the other members bought
        metrics["accuracy_one_member"] = classification_metrics(
            y_test, scores[0].mean(axis=0))["accuracy"]

    prior = ctx.read_json("prior", PRIOR_REPORT)
    pseudo = read_table(ctx.path("pupl", "labels.parquet"), LABEL_COLUMNS)
    pupl = ctx.read_json("pupl", "summary.json")
    joined = train.merge(pseudo, on="index", how="left", validate="one_to_one")
    # Diagnostics from true training labels are left out, not made up, when U has rows
    # of unknown label (real PU data); the kNN probe uses the rows that have one.
    known = joined["y"].to_numpy() >= 0
    in_u = joined["in_u"].to_numpy()
    scored_u = in_u if known[in_u].all() else np.zeros_like(in_u)
    metrics.update({"prior_estimate": prior["prior"], "kmeans_potential": pupl["potential"],
                    "n_test": len(test)})
    if prior.get("prior_true") is not None:
        metrics.update({"prior_true": prior["prior_true"],
                        "prior_abs_error": abs(prior["prior"] - prior["prior_true"])})
    if scored_u.any():
        metrics["pseudo_label_accuracy"] = float(
            (joined.loc[scored_u, "pseudo_label"] == joined.loc[scored_u, "y"]).mean())
    y_known = train["y"].to_numpy()[known]
    if len(np.unique(y_known)) == 2:
        metrics["knn_accuracy"] = knn_accuracy(f_train[known], y_known, f_test, y_test, p.knn_k)
        if encoder_part(model.encoder, "trunk") is not model.encoder:  # LeNet-5's conv trunk
            metrics["knn_accuracy_trunk"] = knn_accuracy(
                embed(model, x_train[known], "trunk", device), y_known,
                embed(model, x_test, "trunk", device), y_test, p.knn_k)
        if p.knn_inputs:
            metrics["knn_accuracy_inputs"] = knn_accuracy(
                input_features(x_train[known]), y_known, input_features(x_test), y_test,
                p.knn_k)

    # which original classes (digits, garments) the binary task's mistakes come from
    by_class = pd.DataFrame(errors_by_class(data.y_test[test["index"].to_numpy()], y_test,
                                            (score >= 0.5).astype(np.int64)))
    by_class.insert(1, "name", [class_name(ctx.params.data.dataset, int(c))
                                for c in by_class["class"]])
    write_table(ctx.path("evaluate", "errors_by_class.csv"), by_class)
    save_figure(ctx.path("evaluate", "errors_by_class.png"),
                class_errors_figure(by_class, metrics["accuracy"]))

    roc = roc_points(y_test, score)
    write_table(ctx.path("evaluate", "roc.csv"), pd.DataFrame(roc))
    save_figure(ctx.path("evaluate", "roc.png"), roc_figure(roc, metrics["roc_auc"]))

    rng = np.random.default_rng(seed)
    pick = np.sort(rng.choice(len(test), size=min(p.embedding_points, len(test)), replace=False))
    if p.embedding == "tsne":
        points = TSNE(n_components=2, init="pca", random_state=seed,
                      perplexity=min(30.0, (len(pick) - 1) / 3)).fit_transform(f_test[pick])
    else:
        points = PCA(n_components=2, random_state=seed).fit_transform(f_test[pick])
    fig = embedding_figure(points, y_test[pick], (score[pick] >= 0.5).astype(int),
                           f"{p.embedding} of test encoder features")
    save_figure(ctx.path("evaluate", "embedding.png"), fig)
    metrics.update(representation_diagnostics(ctx, model, data.x_test[test["index"].to_numpy()
                                                                      [pick]],
                                              y_test[pick], device))

    ctx.validate(lambda: suites.metrics(metrics))
    write_json(ctx.path("evaluate", "metrics.json"), metrics)
    ctx.write_validation("evaluate")
    for name in ("metrics.json", "roc.csv", "roc.png", "embedding.png", "errors_by_class.csv",
                 "errors_by_class.png"):
        ctx.run.log_artifact(ctx.path("evaluate", name))
    # The deployable classifier (encoder + head) as an MLflow model with its signature.
    example = unit_scale(data.x_test[test["index"].to_numpy()[:8]]).astype(np.float32)
    parts = [(encoder_part(member.encoder, reads), head) for member, head in members]
    ctx.run.log_pytorch_model(PUClassifier(*parts[0], mirror=p.tta == "hflip", shift=shift,
                                           others=parts[1:]).eval(), "classifier", example)
    return metrics

