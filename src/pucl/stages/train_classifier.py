"""Stage train_classifier: a head on each pretrained encoder's features (docs/classifiers.md),
fitted by `pucl.classify.fit` with the objective of `classifier.objective` (`pupl_ce`:
PUPL's pseudo-labels; `nnpu` / `upu`: the labelled positives against U with the prior of
`classifier.prior`; `naive_ce`: U as negative; `method_head`: the classifier NcPU or SSC
trained; pucl.classify.objectives). The head reads the encoder's output or its trunk
(`classifier.features`), may be fine-tuned with it (`classifier.finetune_epochs`) and
smoothed over neighbours (`classifier.neighbours`); one per encoder (`pretrain.members`).

Outputs `head.pt` (each member's head, and its fine-tuned encoder), `history.csv`,
`summary.json` (objective, prior and its source, and `degenerate`: why the classifier
calls every training row one class, else null; also a warning and the metric
`classifier_degenerate`) and `crossfit_scores.parquet` (with split.folds, each training
row's score by the classifier fitted without its fold; no rows without).
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd

from pucl.artifacts.models import load_method_heads, load_models
from pucl.classify.fit import degenerate
from pucl.classify.heads import describe
from pucl.classify.objectives import TrainingRows
from pucl.io import read_table, write_json, write_table, write_torch
from pucl.recipe import Recipe
from pucl.recipe.by_input import for_inputs
from pucl.recipe.classifier import classifier_objective, fit_classifiers
from pucl.recipe.crossfit import out_of_fold_scores
from pucl.runtime.device import resolve_device
from pucl.stages._context import CROSSFIT_SCORES, LABEL_COLUMNS, StageContext

NAME = "train_classifier"


def training_rows(ctx: StageContext, objective) -> tuple[TrainingRows, np.ndarray]:
    """The classifier's training rows, and each one's cross-fitting fold (none without
    split.folds)."""
    train = ctx.manifest().query("split == 'train'")
    pseudo = None
    if objective.reads_pseudo_labels:
        table = read_table(ctx.path("pupl", "labels.parquet"), LABEL_COLUMNS)
        pseudo = train[["index"]].merge(table, on="index", how="left", validate="one_to_one")
        pseudo = pseudo["pseudo_label"].to_numpy()
    fold = train["fold"].to_numpy() if "fold" in train else np.empty(0, np.int64)
    return TrainingRows(train["index"].to_numpy(), train["pu"].to_numpy() == 1,
                        train["in_u"].to_numpy(), pseudo), fold


def run(ctx: StageContext) -> dict:
    x_train = ctx.data().x_train
    recipe = for_inputs(Recipe.of(ctx.params), x_train.shape[1:])
    p = recipe.classifier
    objective = classifier_objective(recipe)
    prior, source = ctx.class_prior(p.prior) if objective.needs_prior else (None, None)
    pretrained = ctx.path("pretrain", "model.pt")

    def announce(k: int, n: int) -> None:
        if n > 1:
            print(f"pucl train_classifier: member {k + 1} of {n}", file=sys.stderr)

    (rows, fold), device = training_rows(ctx, objective), resolve_device(ctx.params.base.device)
    targets, members = fit_classifiers(
        recipe, load_models(pretrained), x_train, rows, prior, device,
        load_method_heads(pretrained), ctx.progress, announce)
    write_table(ctx.path("classifier", CROSSFIT_SCORES),
                crossfit_scores(ctx, recipe, x_train, rows, fold, prior, device))
    scores = np.mean([m.head.positive_score(m.features) for m in members], axis=0)
    summary = {"objective": p.objective, "prior": prior, "prior_source": source,
               "finetune_epochs": p.finetune_epochs, "features": p.features,
               "neighbours": p.neighbours, "members": len(members),
               "degenerate": degenerate(scores)}
    if summary["degenerate"]:  # a collapsed PU risk, say: reported, never silent
        print(f"pucl train_classifier: WARNING: {summary['degenerate']} ({p.objective})",
              file=sys.stderr)
    write_outputs(ctx, members, summary)
    return {"train_fit": float(((scores >= 0.5) == targets.labels).mean()),
            "train_positive_share": float((scores >= 0.5).mean()),
            "classifier_degenerate": int(summary["degenerate"] is not None),
            **({"final_loss": members[0].losses[-1]} if members[0].losses else {}),
            **({"classifier_prior": prior} if prior is not None else {})}


def crossfit_scores(ctx: StageContext, recipe: Recipe, x_train: np.ndarray,
                    rows: TrainingRows, fold: np.ndarray, prior: float | None, device
                    ) -> pd.DataFrame:
    """Each training row's score by the classifier fitted without its fold (for evaluate)."""
    pretrained, scores = ctx.path("pretrain", "model.pt"), np.empty(0)
    if len(fold):
        scores = out_of_fold_scores(
            recipe, load_models(pretrained), x_train, rows, fold, prior, device,
            load_method_heads(pretrained), ctx.progress, lambda k, n: print(
                f"pucl train_classifier: cross-fitting fold {k + 1} of {n}", file=sys.stderr))
    return pd.DataFrame({"index": rows.index[:len(fold)], "fold": fold, "score": scores})


def write_outputs(ctx: StageContext, members: list, summary: dict) -> None:
    """head.pt, history.csv and summary.json, and their MLflow record."""
    saved = [{"head": describe(m.head), "encoder_state": m.encoder_state} for m in members]
    write_torch(ctx.path("classifier", "head.pt"),
                {**saved[0], "features": summary["features"],
                 **({"other_members": saved[1:]} if len(saved) > 1 else {})})
    history = []
    for k, m in enumerate(members):
        frame = pd.DataFrame({"epoch": range(1, len(m.losses) + 1), "loss": m.losses,
                              "phase": m.phases})
        history.append(frame.assign(member=k) if len(members) > 1 else frame)
        for i, loss in enumerate(m.losses, start=1):
            if i % 10 == 0 or i == len(m.losses):
                ctx.run.log_metrics({"loss" if k == 0 else f"loss_member{k}": loss}, step=i)
    write_table(ctx.path("classifier", "history.csv"), pd.concat(history, ignore_index=True))
    write_json(ctx.path("classifier", "summary.json"), summary)
    ctx.run.set_tags({"classifier_objective": summary["objective"],
                      "classifier_finetuned": str(summary["finetune_epochs"] > 0).lower(),
                      **({"classifier_prior_source": summary["prior_source"]}
                         if summary["prior_source"] else {})})
    for name in ("head.pt", "summary.json", CROSSFIT_SCORES):
        ctx.run.log_artifact(ctx.path("classifier", name))
