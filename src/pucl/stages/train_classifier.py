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
row's score by the classifier fitted without its fold; no rows without). With folds and
`classifier.shipped: ensemble` the folds' classifiers are the members, and no
classifier is fitted on every row.
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd

from pucl.artifacts.models import load_method_heads, load_models
from pucl.classify.fit import degenerate
from pucl.classify.heads import describe
from pucl.classify.objectives import TrainingRows
from pucl.io import write_json, write_table, write_torch
from pucl.recipe import Recipe
from pucl.recipe.by_input import for_inputs
from pucl.recipe.classifier import classifier_objective, fit_classifiers
from pucl.recipe.crossfit import CrossFitted, fit_folds
from pucl.runtime.device import resolve_device
from pucl.stages._context import CROSSFIT_SCORES, StageContext

NAME = "train_classifier"


def run(ctx: StageContext) -> dict:
    x_train = ctx.data().x_train
    # decided for the rows pretraining read, as the estimator decides for its rows
    recipe = for_inputs(Recipe.of(ctx.params), x_train.shape[1:], len(ctx.rows("train")))
    p = recipe.classifier
    objective = classifier_objective(recipe)
    prior, source = ctx.class_prior(p.prior) if objective.needs_prior else (None, None)
    rows, fold = ctx.training_rows(objective.reads_pseudo_labels)
    device = resolve_device(ctx.params.base.device)
    crossfit = cross_fitted(ctx, recipe, x_train, rows, fold, prior, device)
    write_table(ctx.path("classifier", CROSSFIT_SCORES), pd.DataFrame(
        {"index": rows.index[:len(fold)], "fold": fold,
         "score": crossfit.scores if crossfit else np.empty(0)}))
    if crossfit and p.shipped == "ensemble":  # the folds' classifiers ship; no refit
        targets = objective.targets(rows, prior)
        encoders, _, members = (list(part) for part in zip(*crossfit.members, strict=True))
        # train_fit then reads each row's score by the member that did not train on it
        scores = crossfit.scores[pd.Index(rows.index).get_indexer(targets.rows)]
    else:
        pretrained = ctx.path("pretrain", "model.pt")
        targets, members = fit_classifiers(
            recipe, load_models(pretrained), x_train, rows, prior, device,
            load_method_heads(pretrained), ctx.progress, lambda k, n: n > 1 and print(
                f"pucl train_classifier: member {k + 1} of {n}", file=sys.stderr),
            **ctx.side_by_side())
        encoders = list(range(len(members)))
        scores = np.mean([m.head.positive_score(m.features) for m in members], axis=0)
    summary = {"objective": p.objective, "prior": prior, "prior_source": source,
               "finetune_epochs": p.finetune_epochs, "features": p.features, "neighbours":
               p.neighbours, "members": len(members), "shipped": p.shipped if crossfit
               else "refit", "degenerate": degenerate(scores)}
    if summary["degenerate"]:  # a collapsed PU risk, say: reported, never silent
        print(f"pucl train_classifier: WARNING: {summary['degenerate']} ({p.objective})",
              file=sys.stderr)
    write_outputs(ctx, members, encoders, summary)
    return {"train_fit": float(((scores >= 0.5) == targets.labels).mean()),
            "train_positive_share": float((scores >= 0.5).mean()),
            "classifier_degenerate": int(summary["degenerate"] is not None),
            **({"final_loss": members[0].losses[-1]} if members[0].losses else {}),
            **({"classifier_prior": prior} if prior is not None else {})}


def cross_fitted(ctx: StageContext, recipe: Recipe, x_train: np.ndarray, rows: TrainingRows,
                 fold: np.ndarray, prior: float | None, device) -> CrossFitted | None:
    """The classifier fitted without each fold (for evaluate's estimates), None without
    split.folds."""
    if not len(fold):
        return None
    pretrained = ctx.path("pretrain", "model.pt")
    return fit_folds(recipe, load_models(pretrained), x_train, rows, fold, prior, device,
                     load_method_heads(pretrained), ctx.progress, lambda k, n: print(
                         f"pucl train_classifier: cross-fitting fold {k + 1} of {n}",
                         file=sys.stderr), **ctx.side_by_side())


def write_outputs(ctx: StageContext, members: list, encoders: list[int], summary: dict
                  ) -> None:
    """head.pt (each member with the pretrained encoder it started from), history.csv and
    summary.json, and their MLflow record."""
    saved = [{"head": describe(m.head), "encoder_state": m.encoder_state, "encoder": e}
             for m, e in zip(members, encoders, strict=True)]
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
                      "classifier_shipped": summary["shipped"],
                      **({"classifier_prior_source": summary["prior_source"]}
                         if summary["prior_source"] else {})})
    for name in ("head.pt", "summary.json", CROSSFIT_SCORES):
        ctx.run.log_artifact(ctx.path("classifier", name))
