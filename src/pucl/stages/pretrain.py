"""Stage pretrain: encoders and projection heads (docs/objectives.md); with
`pretrain.method: ncpu`, NcPU (paper 001), which trains a classifier along with them.

Outputs: `model.pt`, `history.csv` (a DVC plot), `loss.png`, and `checkpoint.pt` (a
`persist` output a rerun resumes from); finished encoders are cached in
`paths.pretrain_cache` (`pucl.artifacts.pretraining`). `pretrain.members` = m > 1 trains
the encoders of m seeds (pretrain.seed, else base.seed, +1, ...) as single runs would,
side by side with `base.fit_workers` > 1 (pucl.stages._pretrain_members); `model.pt`
holds the first, the others under `other_members`."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from pucl.artifacts.pretraining import (
    fingerprint,
    history_metrics,
    is_cached,
    read_history,
    restore_from_cache,
    store_in_cache,
    write_history,
)
from pucl.io import read_torch, save_figure, write_torch
from pucl.recipe import Recipe
from pucl.recipe.by_input import for_inputs
from pucl.recipe.pretraining import member_seeds, needs_prior
from pucl.reporting.figures import loss_figure
from pucl.runtime.device import resolve_device
from pucl.stages._context import StageContext
from pucl.stages._pretrain_members import side_by_side, take_member, train_here

NAME = "pretrain"


def log_epochs(ctx: StageContext, frame: pd.DataFrame, suffix: str) -> None:
    """A member's curves in MLflow from its history (restored, or trained in a worker)."""
    for row in frame.itertuples(index=False):
        ctx.run.log_metrics({f"loss{suffix}": row.loss, f"lr{suffix}": row.lr,
                             **({f"images_per_s{suffix}": row.images_per_s}
                                if np.isfinite(row.images_per_s) else {})},
                            step=int(row.epoch))


def pretrain_member(ctx: StageContext, recipe: Recipe, k: int, seed: int, fp: str,
                    last: bool, images, is_labeled, prior: float | None, apart: bool
                    ) -> tuple[dict, pd.DataFrame, Path | None]:
    """Encoder k with `seed` (fingerprint `fp`): restored from paths.pretrain_cache, taken
    from the worker that trained it (`apart`), or trained here. Its saved model, its
    per-epoch history, and the cache entry it was restored from. Its MLflow curves are
    `loss`, `lr`, `images_per_s` for the first, `loss_member{k}`, ... for the others."""
    suffix, out, entry = f"_member{k}" if k else "", ctx.directory("pretrain"), cache_entry(ctx, fp)
    restored = not apart and restore_from_cache(entry, out, checkpoint=last)
    if restored:
        print(f"pucl pretrain: reusing the finished pretraining {entry}", file=sys.stderr)
    elif apart:
        take_member(out, k)
    else:
        frame = train_here(out, k, recipe, images, is_labeled, prior, seed, fp,
                           resolve_device(ctx.params.base.device), ctx.progress,
                           lambda s: ctx.run.log_metrics({
                               f"loss{suffix}": s.loss, f"lr{suffix}": s.lr,
                               f"images_per_s{suffix}": s.images_per_s}, step=s.epoch))
    if restored or apart:
        frame = read_history(out)
        log_epochs(ctx, frame, suffix)
    if not restored:
        store_in_cache(entry, out)
    saved = read_torch(ctx.path("pretrain", "model.pt"), "model",
                       "delete it and its paths.pretrain_cache entry, then rerun pretrain")
    return {**saved, "seed": seed}, frame, entry if restored else None


def cache_entry(ctx: StageContext, fp: str) -> Path | None:
    cache = ctx.params.paths.pretrain_cache
    return (ctx.root / cache / fp).resolve() if cache else None


def run(ctx: StageContext) -> dict:
    train = ctx.rows("train").drop(columns="fold", errors="ignore")  # folds refit heads only
    images = torch.from_numpy(ctx.data().x_train[train["index"].to_numpy()])
    recipe = for_inputs(Recipe.of(ctx.params), images.shape[1:], len(images))  # as pretrain()
    p = recipe.pretrain
    is_labeled = torch.from_numpy(train["pu"].to_numpy() == 1)
    prior, source = ctx.class_prior(p.prior) if needs_prior(recipe) else (None, None)
    seeds = member_seeds(recipe)
    fps = [fingerprint(ctx.params, train, prior, images, seed) for seed in seeds]
    apart = side_by_side(ctx.directory("pretrain"), recipe, images, is_labeled, prior, [
        (k, seed, fp) for k, (seed, fp) in enumerate(zip(seeds, fps, strict=True))
        if not is_cached(cache_entry(ctx, fp))], resolve_device(ctx.params.base.device),
        progress=ctx.progress, **ctx.side_by_side())
    members, frames, reused = [], [], []
    for k, seed in enumerate(seeds):
        if len(seeds) > 1 and k not in apart:
            print(f"pucl pretrain: encoder {k + 1} of {len(seeds)} (seed {seed})",
                  file=sys.stderr)
        saved, frame, entry = pretrain_member(ctx, recipe, k, seed, fps[k], k == len(seeds) - 1,
                                              images, is_labeled, prior, k in apart)
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
