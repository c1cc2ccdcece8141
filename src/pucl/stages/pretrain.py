"""Stage pretrain: encoders and projection heads (docs/objectives.md); with
`pretrain.method: ncpu`, NcPU (paper 001), which trains a classifier along with them.

Outputs: `model.pt`, `history.csv` (a DVC plot), `loss.png`, and `checkpoint.pt` (a
`persist` output a rerun resumes from); finished encoders are cached in
`paths.pretrain_cache` (`pucl.artifacts.pretraining`). `pretrain.members` = m > 1 trains
the encoders of m seeds (pretrain.seed, else base.seed, +1, ...) as single runs would;
`model.pt` holds the first, the others under `other_members`."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from pucl.artifacts.models import describe_model
from pucl.artifacts.pretraining import (
    fingerprint,
    history_metrics,
    load_resume_state,
    read_history,
    restore_from_cache,
    store_in_cache,
    write_history,
)
from pucl.io import read_torch, save_figure, write_torch
from pucl.pretraining.loop import EpochStats
from pucl.recipe import Recipe
from pucl.recipe.by_input import for_inputs
from pucl.recipe.pretraining import member_seeds, needs_prior, pretrain
from pucl.reporting.figures import loss_figure
from pucl.runtime.device import resolve_device
from pucl.stages._context import StageContext

NAME = "pretrain"


def train_and_save(ctx: StageContext, recipe: Recipe, images, is_labeled, fp: str,
                   prior: float | None, seed: int, suffix: str = "") -> pd.DataFrame:
    checkpoint = ctx.path("pretrain", "checkpoint.pt")

    def on_epoch(stats: EpochStats, state: dict) -> None:
        write_torch(checkpoint, {**state, "fingerprint": fp})
        ctx.run.log_metrics({f"loss{suffix}": stats.loss, f"lr{suffix}": stats.lr,
                             f"images_per_s{suffix}": stats.images_per_s}, step=stats.epoch)

    model, result = pretrain(recipe, images, is_labeled, prior, seed,
                             resolve_device(ctx.params.base.device), ctx.progress,
                             load_resume_state(checkpoint, fp), on_epoch)
    write_torch(ctx.path("pretrain", "model.pt"), {
        **describe_model(model), "loss": recipe.pretrain.loss, "method": recipe.pretrain.method,
        "classifier": result.classifier, "seed": seed})
    frame = pd.DataFrame([h.to_dict() for h in result.history])
    write_history(ctx.directory("pretrain"), frame)
    return frame


def pretrain_member(ctx: StageContext, recipe: Recipe, k: int, seed: int, last: bool,
                    images, is_labeled, prior: float | None, train: pd.DataFrame
                    ) -> tuple[dict, pd.DataFrame, Path | None]:
    """Encoder k, pretrained with `seed` (or restored from paths.pretrain_cache): its
    saved model, its per-epoch history, and the cache entry it was restored from. Its
    MLflow curves are `loss`, `lr`, `images_per_s` for the first, `loss_member{k}`, ...
    for the others."""
    suffix, out = f"_member{k}" if k else "", ctx.directory("pretrain")
    fp = fingerprint(ctx.params, train, prior, images, seed)
    cache = ctx.params.paths.pretrain_cache
    entry = (ctx.root / cache / fp).resolve() if cache else None
    if restore_from_cache(entry, out, checkpoint=last):
        print(f"pucl pretrain: reusing the finished pretraining {entry}", file=sys.stderr)
        frame = read_history(out)
        for row in frame.itertuples(index=False):
            ctx.run.log_metrics({f"loss{suffix}": row.loss, f"lr{suffix}": row.lr,
                                 **({f"images_per_s{suffix}": row.images_per_s}
                                    if np.isfinite(row.images_per_s) else {})},
                                step=int(row.epoch))
    else:
        frame = train_and_save(ctx, recipe, images, is_labeled, fp, prior, seed, suffix)
        store_in_cache(entry, out)
        entry = None
    saved = read_torch(ctx.path("pretrain", "model.pt"), "model",
                       "delete it and its paths.pretrain_cache entry, then rerun pretrain")
    return {**saved, "seed": seed}, frame, entry


def run(ctx: StageContext) -> dict:
    train = ctx.rows("train").drop(columns="fold", errors="ignore")  # folds refit heads only
    images = torch.from_numpy(ctx.data().x_train[train["index"].to_numpy()])
    recipe = for_inputs(Recipe.of(ctx.params), images.shape[1:], len(images))  # as pretrain()
    p = recipe.pretrain
    is_labeled = torch.from_numpy(train["pu"].to_numpy() == 1)
    prior, source = ctx.class_prior(p.prior) if needs_prior(recipe) else (None, None)
    seeds = member_seeds(recipe)
    members, frames, reused = [], [], []
    for k, seed in enumerate(seeds):
        if len(seeds) > 1:
            print(f"pucl pretrain: encoder {k + 1} of {len(seeds)} (seed {seed})",
                  file=sys.stderr)
        saved, frame, entry = pretrain_member(ctx, recipe, k, seed, k == len(seeds) - 1,
                                              images, is_labeled, prior, train)
        members.append(saved)
        frames.append(frame.assign(member=k) if len(seeds) > 1 else frame)
        reused.append(entry)
    if len(seeds) > 1:  # the first member stays the model every reader loads by default
        write_torch(ctx.path("pretrain", "model.pt"),
                    {**members[0], "other_members": members[1:]})
        write_history(ctx.directory("pretrain"), pd.concat(frames, ignore_index=True))
    if any(entry is not None for entry in reused):
        ctx.run.set_tags({"pretrain_reused": ", ".join(str(e) for e in reused if e)})
    save_figure(ctx.path("pretrain", "loss.png"), loss_figure(frames, seeds, p.method, p.loss))
    for name in ("history.csv", "loss.png", "model.pt"):
        ctx.run.log_artifact(ctx.path("pretrain", name))
    ctx.run.set_tags({"pretrain_loss": p.loss,  # what `auto` decided for these rows
                      **({"loss_prior_source": source} if source is not None else {})})
    return {**history_metrics(frames), **({"loss_prior": prior} if prior is not None else {}),
            "members": len(seeds),  # reused 1: every encoder restored from the cache
            "reused": float(all(entry is not None for entry in reused))}
