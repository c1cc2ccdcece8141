"""Stage train_classifier: a linear head on frozen encoder features (docs/classifiers.md):
the encoder's output, or with `classifier.features: trunk` its convolutional trunk's.

`classifier.objective` picks what it learns from: `pupl_ce` (default) cross-entropy on the
PUPL pseudo-labels; `nnpu` / `upu` the PU risks on labelled positives vs U with the prior
of `classifier.prior`; `naive_ce` cross-entropy with U as negative. With
`classifier.finetune_epochs` > 0 the encoder and the trained head then learn together on
the same objective (pretraining's augmentations), and `head.pt` also holds the fine-tuned
encoder. With `classifier.self_train_epochs` > 0 (PU objectives) they then learn with
cross-entropy from the classifier's own confident rank pseudo-labels of U. With
`classifier.neighbours` = k > 0 the head's scores are smoothed over the k nearest
training rows, whose features and scores `head.pt` then holds. One classifier per
pretrained encoder (`pretrain.members`), times `classifier.members` per encoder with seeds
base.seed, base.seed + 1, ...; their scores are averaged. Outputs `head.pt`,
`history.csv` (head, fine-tuning and self-training epochs) and `summary.json` (objective,
prior used and its source, fine-tuning epochs, features, neighbours, self-training's
rows, and `degenerate`: why the head calls every training row one class, else null; also
a warning and the metric `classifier_degenerate`)."""

from __future__ import annotations

import copy
import sys
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from pucl.artifacts import load_method_head, load_model, load_models
from pucl.classify.finetune import FinetuneSettings, finetune
from pucl.classify.heads import describe
from pucl.classify.linear import LinearSettings, train_linear_head, train_pu_head
from pucl.classify.neighbours import NeighbourHead
from pucl.classify.objectives import CLASSIFIER_OBJECTIVES
from pucl.classify.self_train import confident_pseudo_labels
from pucl.data.augment import make_augment
from pucl.errors import DataError, ParamsError
from pucl.features import embed, encoder_part
from pucl.io import read_table, write_json, write_table, write_torch
from pucl.runtime import resolve_device, seeded_generator
from pucl.stages._context import LABEL_COLUMNS, StageContext

NAME = "train_classifier"
# The rows a head trains on (and neighbour smoothing's bank): labelled positives and U.
TRAINING_ROWS = "split == 'train' and (in_u or pu == 1)"


def run(ctx: StageContext) -> dict:
    p = ctx.params.classifier
    settings = LinearSettings(p.epochs, p.lr, p.weight_decay, p.batch_size)
    data = ctx.data()
    pretrained = ctx.path("pretrain", "model.pt")
    models = [load_model(pretrained)]
    # The global random state a one-encoder run initialises its head from (the harness's
    # seed, advanced by building one model): every member starts from it, so member k
    # trains as the single run of its encoder does.
    start = torch.get_rng_state()
    models += load_models(pretrained, start=1)
    device = resolve_device(ctx.params.base.device)
    summary: dict = {"objective": p.objective, "prior": None, "prior_source": None,
                     "finetune_epochs": p.finetune_epochs, "finetune_ema": p.finetune_ema,
                     "features": p.features, "neighbours": p.neighbours,
                     "members": len(models) * p.members, "encoders": len(models)}
    if p.neighbours:  # checked before any training
        n_rows = len(ctx.manifest().query(TRAINING_ROWS))
        if p.neighbours > n_rows:
            raise ParamsError(f"classifier.neighbours = {p.neighbours} exceeds the {n_rows} "
                              f"training rows (allowed: 0 to {n_rows})")
    entry = CLASSIFIER_OBJECTIVES.get(p.objective)
    objective = entry.build(ctx.settings("classifier", entry))
    # What every member learns from: the rows, their labels, the head's fit on a member's
    # features of them, and what fine-tuning needs.
    which = p.features
    if objective.source == "pu":
        manifest = ctx.manifest()
        train = manifest[manifest["split"] == "train"]
        positive = train.loc[train["pu"] == 1, "index"].to_numpy()
        unlabeled = train.loc[train["in_u"], "index"].to_numpy()
        rows = np.union1d(positive, unlabeled)
        lookup = np.searchsorted(rows, positive), np.searchsorted(rows, unlabeled)
        prior, source = ctx.class_prior(p.prior)
        summary.update(prior=prior, prior_source=source)

        def fit_head(features, generator, member):
            return train_pu_head(features[lookup[0]], features[lookup[1]], prior,
                                 objective.loss, settings, generator, ctx.progress,
                                 objective.beta, objective.gamma)

        labels = np.isin(rows, positive).astype(np.int64)  # fit reported against P vs U
        tune = {"positive": torch.from_numpy(lookup[0]), "unlabeled": torch.from_numpy(lookup[1]),
                "kind": objective.loss, "prior": prior, "beta": objective.beta,
                "gamma": objective.gamma}
    elif objective.source == "method":  # NcPU trained its classifier with the encoder
        train = ctx.manifest().query(TRAINING_ROWS)
        rows, labels = train["index"].to_numpy(), train["pu"].to_numpy().astype(np.int64)
        which = "encoder"

        def fit_head(features, generator, member):
            return load_method_head(ctx.path("pretrain", "model.pt"), member), []

        tune = {}
    else:
        if objective.source == "pseudo_labels":
            table = read_table(ctx.path("pupl", "labels.parquet"), LABEL_COLUMNS)
            rows, labels = table["index"].to_numpy(), table["pseudo_label"].to_numpy()
        else:  # naive_ce: every unlabeled row taken as negative
            train = ctx.manifest().query(TRAINING_ROWS)
            rows, labels = train["index"].to_numpy(), train["pu"].to_numpy()
        if len(set(labels.tolist())) < 2:
            raise DataError(f"{p.objective}: the training labels hold a single class; the "
                            f"classifier needs both (positive fraction {labels.mean():.3f})")

        def fit_head(features, generator, member):
            return train_linear_head(features, labels, settings, generator,
                                     progress=ctx.progress)

        tune = {"labels": torch.from_numpy(labels.astype(np.int64)), "kind": "ce"}
    members = []
    total = len(models) * p.members
    for e, pretrained_model in enumerate(models):
        for c in range(p.members):  # classifier c of encoder e, from seed base.seed + c
            if total > 1:
                print(f"pucl train_classifier: member {len(members) + 1} of {total}",
                      file=sys.stderr)
            # fine-tuning changes the encoder in place: the encoder's other classifiers
            # start from a copy of the pretrained one
            model = pretrained_model if c == p.members - 1 else copy.deepcopy(pretrained_model)
            if c == 0:
                torch.set_rng_state(start)
            else:
                torch.manual_seed(ctx.params.base.seed + c)
            members.append(_fit_member(ctx, e, ctx.params.base.seed + c, model, data, rows,
                                       which, fit_head, tune, device, summary))
    scores = np.mean([m.head.positive_score(m.features) for m in members], axis=0)
    predicted = scores >= 0.5
    train_fit = float((predicted == labels).mean())
    share = float(predicted.mean())
    summary["degenerate"] = (None if 0.0 < share < 1.0 else
                             f"the classifier calls every training row "
                             f"{'positive' if share else 'negative'}")
    if summary["degenerate"]:  # a collapsed PU risk, say: reported, never silent
        print(f"pucl train_classifier: WARNING: {summary['degenerate']} ({p.objective})",
              file=sys.stderr)
    saved = [{"head": describe(m.head), "encoder_state": m.encoder_state,
              **({"encoder": k // p.members} if p.members > 1 else {})}
             for k, m in enumerate(members)]
    write_torch(ctx.path("classifier", "head.pt"),
                {**saved[0], "features": p.features,
                 **({"other_members": saved[1:]} if len(saved) > 1 else {})})
    tuning = p.finetune_epochs + p.self_train_epochs
    history = []
    for k, m in enumerate(members):
        frame = pd.DataFrame({"epoch": range(1, len(m.losses) + 1), "loss": m.losses,
                              "phase": ["head"] * (len(m.losses) - tuning)
                              + ["finetune"] * p.finetune_epochs
                              + ["self_train"] * p.self_train_epochs})
        history.append(frame.assign(member=k) if len(members) > 1 else frame)
        for i, loss in enumerate(m.losses, start=1):
            if i % 10 == 0 or i == len(m.losses):
                ctx.run.log_metrics({"loss" if k == 0 else f"loss_member{k}": loss}, step=i)
    write_table(ctx.path("classifier", "history.csv"), pd.concat(history, ignore_index=True))
    write_json(ctx.path("classifier", "summary.json"), summary)
    ctx.run.set_tags({"classifier_objective": p.objective,
                      "classifier_finetuned": str(p.finetune_epochs > 0).lower(),
                      **({"classifier_prior_source": summary["prior_source"]}
                         if summary["prior_source"] else {})})
    ctx.run.log_artifact(ctx.path("classifier", "head.pt"))
    ctx.run.log_artifact(ctx.path("classifier", "summary.json"))
    losses = members[0].losses
    metrics = {"train_fit": train_fit, "train_positive_share": share,
               "classifier_degenerate": int(summary["degenerate"] is not None),
               **({"final_loss": losses[-1]} if losses else {})}
    if summary["prior"] is not None:
        metrics["classifier_prior"] = summary["prior"]
    return metrics


@dataclass
class Member:
    """One pretrained encoder's classifier: its head, its fine-tuned encoder weights (None
    when frozen), its per-epoch losses and its features of the training rows."""

    head: torch.nn.Module
    encoder_state: dict | None
    losses: list[float]
    features: np.ndarray


def _fit_member(ctx: StageContext, encoder: int, seed: int, model, data, rows: np.ndarray,
                which: str, fit_head, tune: dict, device: torch.device, summary: dict
                ) -> Member:
    """Head, fine-tuning, self-training and neighbour smoothing on one encoder, the
    batches and augmentations drawn from `seed`. The first classifier of every encoder
    starts from the same random states: with the PU objectives (which read neither PUPL
    nor a re-estimated prior), that of encoder k is the single run whose encoder was
    pretrained with encoder k's seed; otherwise every member learns from the first
    encoder's labels."""
    p = ctx.params.classifier
    generator = seeded_generator(seed)
    features = embed(model, data.x_train[rows], which, device)
    head, losses = fit_head(features, generator, encoder)
    encoder_state = None
    if p.finetune_epochs > 0:
        tuned = finetune(encoder_part(model.encoder, p.features), head,
                         torch.from_numpy(data.x_train[rows]),
                         FinetuneSettings(p.finetune_epochs, p.finetune_lr, p.weight_decay,
                                          p.batch_size, p.finetune_ema),
                         make_augment(ctx.params.pretrain.augment, data.is_tabular), generator,
                         device, progress=ctx.progress, **tune)
        losses = [*losses, *tuned]
        head.cpu()
        encoder_state = {n: t.cpu() for n, t in model.encoder.state_dict().items()}
        features = embed(model, data.x_train[rows], p.features, device)
    if p.self_train_epochs:
        tuned, trained_on = _self_train(ctx, data, model, head, features, rows, tune,
                                        generator, device)
        summary.setdefault("self_train", trained_on)  # the first member's
        losses = [*losses, *tuned]
        head.cpu()
        encoder_state = {n: t.cpu() for n, t in model.encoder.state_dict().items()}
        features = embed(model, data.x_train[rows], p.features, device)
    if p.neighbours:
        head = NeighbourHead(head, torch.from_numpy(features), p.neighbours)
    return Member(head, encoder_state, losses, features)


def _self_train(ctx: StageContext, data, model, head, features: np.ndarray, rows: np.ndarray,
                tune: dict, generator: torch.Generator, device: torch.device
                ) -> tuple[list[float], dict]:
    """Fine-tune encoder and head with cross-entropy on the labelled positives and the
    head's confident rank pseudo-labels of U (pucl.classify.self_train); returns the
    per-epoch losses and what was trained on."""
    p = ctx.params.classifier
    positive, unlabeled = tune["positive"].numpy(), tune["unlabeled"].numpy()
    scorer = NeighbourHead(head, torch.from_numpy(features), p.neighbours) \
        if p.neighbours else head  # the scores the classifier will give
    scores = scorer.positive_score(features[unlabeled])
    chosen, pseudo = confident_pseudo_labels(scores, tune["prior"], p.self_train_keep)
    at = np.concatenate([positive, unlabeled[chosen]])  # positions in `rows`
    labels = np.concatenate([np.ones(len(positive), np.int64), pseudo])
    losses = finetune(encoder_part(model.encoder, p.features), head,
                      torch.from_numpy(data.x_train[rows[at]]),
                      FinetuneSettings(p.self_train_epochs, p.finetune_lr, p.weight_decay,
                                       p.batch_size, p.finetune_ema),
                      make_augment(ctx.params.pretrain.augment, data.is_tabular),
                      generator, device, labels=torch.from_numpy(labels), kind="ce",
                      progress=ctx.progress)
    return losses, {"epochs": p.self_train_epochs, "keep": p.self_train_keep,
                    "unlabeled_kept": int(len(chosen)),
                    "unlabeled_positive_share": float(pseudo.mean())}
