"""Stage pretrain: contrastive pretraining of encoder + projection head (docs/objectives.md),
or with `pretrain.method: ncpu` the NcPU method (paper 001), which trains a classifier
along with them (kept in `model.pt` for `classifier.objective: method_head`).

Outputs: `model.pt` (weights + architecture), `history.csv` (per-epoch loss and learning
rate; a DVC plot), `loss.png`, and `checkpoint.pt`, a DVC `persist` output
rewritten atomically after every epoch. None holds a clock time, so the same training
run again leaves them byte for byte as they were; the seconds and images/s of each
epoch go to MLflow and to `timing.csv`, which no stage reads and DVC does not track.
A rerun whose params, seed and split match the checkpoint's fingerprint resumes from it
(bit-identical to an uninterrupted run); any other checkpoint is ignored and training
starts over.

A finished pretraining is also kept under `paths.pretrain_cache/<fingerprint>/`; a later
run with the same fingerprint (the sweep points of one seed that differ only downstream,
say) copies it instead of training again, and says so (tag `pretrain_reused`).

With `pretrain.members` = m > 1 it pretrains m encoders on the same split, with seeds
pretrain.seed (else base.seed), +1, ...; each is the encoder a single run with that seed
trains, and is cached as such. `model.pt` then holds the first as usual (what PUPL and
the diagnostics read) and the others under `other_members`; history.csv gains a `member`
column. A checkpoint covers the member in training; the finished ones are resumed from
the cache (with paths.pretrain_cache null, a rerun trains every member again).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import torch

import pucl.data.augment as augment_module
import pucl.recipe as recipe_package
import pucl.recipe.pretraining as recipe_module
from pucl.artifacts import describe_model
from pucl.errors import DataError
from pucl.io import atomic_path, read_torch, save_figure, write_table, write_torch
from pucl.pretraining.loop import EpochStats
from pucl.recipe import Recipe
from pucl.recipe.pretraining import (
    encoder_identity,
    member_seeds,
    needs_prior,
    pretrain,
    resolve_encoder,
)
from pucl.reporting.figures import loss_figure
from pucl.runtime.device import resolve_device
from pucl.stages._context import StageContext

NAME = "pretrain"

# Code whose change must invalidate a checkpoint or a cached encoder (it shapes what an
# epoch computes): these packages whole, the augmentations and the recipe's pretraining.
TRAINING_PACKAGES = ("pucl.pretraining", "pucl.losses", "pucl.models")
TRAINING_MODULES = (augment_module, recipe_package, recipe_module)


def training_code_files() -> list[Path]:
    """Every file of TRAINING_PACKAGES and TRAINING_MODULES, in a fixed order."""
    import importlib

    files = [Path(m.__file__) for m in TRAINING_MODULES]
    for name in TRAINING_PACKAGES:
        package = Path(importlib.import_module(name).__file__).parent
        files.extend(sorted(package.rglob("*.py")))
    return files


def loss_prior(ctx: StageContext, recipe: Recipe) -> tuple[float | None, str | None]:
    """The class prior for PUNCE / DCL and for SSC's prior-ranked negatives, and where it
    came from (None when the method and loss need none, as NcPU)."""
    if not needs_prior(recipe):
        return None, None
    return ctx.class_prior(ctx.params.pretrain.prior)


def fingerprint(ctx: StageContext, manifest: pd.DataFrame, prior: float | None,
                images: torch.Tensor, seed: int | None = None) -> str:
    """What a resumable checkpoint or a cached encoder must match: params that shape
    training, the pretraining seed, the split, the training inputs' content (a file
    edited in place keeps its rows but not its pixels), the training code, and the device
    it runs on (a CUDA encoder is not the CPU's, so neither is reused or resumed by a run
    on the other)."""
    p = ctx.params
    code = hashlib.sha256(b"".join(f.read_bytes() for f in training_code_files()))
    content = hashlib.sha256(np.ascontiguousarray(images.numpy()).data).hexdigest()
    key = encoder_identity(Recipe.of(p), seed)
    key["pretrain"]["encoder"] = resolve_encoder(p.pretrain.encoder, images.shape[1:])
    key.update({"data": p.data.model_dump(), "manifest": hashlib.sha256(
        pd.util.hash_pandas_object(manifest, index=False).to_numpy().tobytes()).hexdigest(),
        "inputs": content, "code": code.hexdigest(), "prior": prior,
        "device": resolve_device(p.base.device).type})
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def load_resume_state(path, expected: str) -> dict | None:
    if not path.exists():
        return None
    try:
        state = read_torch(path, "checkpoint", "delete it to train from epoch 0")
    except DataError:
        raise  # not a checkpoint pucl wrote: refused, not silently replaced
    except Exception as exc:
        print(f"pucl pretrain: ignoring unreadable checkpoint {path} ({type(exc).__name__}); "
              "starting from epoch 0", file=sys.stderr)
        return None
    if not isinstance(state, dict) or state.get("fingerprint") != expected:
        return None
    print(f"pucl pretrain: resuming from {path} at epoch {state['epoch']}", file=sys.stderr)
    return state


CACHED_FILES = ("model.pt", "history.csv", "checkpoint.pt")
# Clock times per epoch: not a DVC output (a rerun of the same training must leave every
# output, and so dvc.lock, unchanged), kept beside history.csv and in the cache entry.
TIMING_FILE = "timing.csv"
OUTCOME_COLUMNS = ["epoch", "loss", "lr"]
TIMING_COLUMNS = ["epoch", "seconds", "images_per_s"]


def write_history(ctx: StageContext, frame: pd.DataFrame) -> None:
    """history.csv (what each epoch computed) and timing.csv (what it took)."""
    member = ["member"] if "member" in frame else []
    write_table(ctx.path("pretrain", "history.csv"), frame[OUTCOME_COLUMNS + member])
    write_table(ctx.path("pretrain", TIMING_FILE), frame[TIMING_COLUMNS + member])


def read_history(ctx: StageContext) -> pd.DataFrame:
    """history.csv with its timing.csv beside it (nan times where that is missing)."""
    frame = pd.read_csv(ctx.path("pretrain", "history.csv"))
    timing = ctx.path("pretrain", TIMING_FILE)
    if timing.is_file():
        return frame.merge(pd.read_csv(timing), on=["epoch", *(["member"] if "member" in frame
                                                              else [])], how="left")
    return frame.assign(seconds=np.nan, images_per_s=np.nan)


def cache_entry(ctx: StageContext, fp: str) -> Path | None:
    cache = ctx.params.paths.pretrain_cache
    return (ctx.root / cache / fp).resolve() if cache else None


def restore_from_cache(ctx: StageContext, entry: Path | None, checkpoint: bool = True) -> bool:
    """Copy a cached pretraining into the stage outputs; without `checkpoint`, leave
    checkpoint.pt alone (it may hold a later member's unfinished training)."""
    if entry is None or not all((entry / name).is_file() for name in CACHED_FILES):
        return False
    names = [*(CACHED_FILES if checkpoint else CACHED_FILES[:2]), TIMING_FILE]
    for name in names:
        if (entry / name).is_file():
            with atomic_path(ctx.path("pretrain", name)) as tmp:
                shutil.copyfile(entry / name, tmp)
        else:  # entries cached before timing.csv existed lack it: no stale times either
            ctx.path("pretrain", name).unlink(missing_ok=True)
    return True


def store_in_cache(ctx: StageContext, entry: Path | None) -> None:
    """Best effort: the cache only saves time, so a full disk here warns, not fails."""
    if entry is None or entry.exists():
        return
    staging = entry.with_name(f"{entry.name}.tmp-{os.getpid()}")
    try:
        staging.mkdir(parents=True, exist_ok=True)
        for name in (*CACHED_FILES, TIMING_FILE):
            shutil.copyfile(ctx.path("pretrain", name), staging / name)
        os.replace(staging, entry)  # complete or absent, never half-written
    except OSError as exc:
        if not entry.exists():  # a parallel run filling the same entry first is fine
            print(f"pucl pretrain: warning: not cached in {entry.parent} ({exc})",
                  file=sys.stderr)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def train_and_save(ctx: StageContext, recipe: Recipe, images, is_labeled, checkpoint: Path,
                   fp: str, prior: float | None, seed: int, suffix: str = "") -> pd.DataFrame:
    def on_epoch(stats: EpochStats, state: dict) -> None:
        write_torch(checkpoint, {**state, "fingerprint": fp})
        ctx.run.log_metrics({f"loss{suffix}": stats.loss, f"lr{suffix}": stats.lr,
                             f"images_per_s{suffix}": stats.images_per_s}, step=stats.epoch)

    model, result = pretrain(recipe, images, is_labeled, prior, seed,
                             resolve_device(ctx.params.base.device), ctx.progress,
                             load_resume_state(checkpoint, fp), on_epoch)
    p = recipe.pretrain
    write_torch(ctx.path("pretrain", "model.pt"), {
        **describe_model(model), "loss": p.loss, "method": p.method,
        "classifier": result.classifier, "seed": seed})
    frame = pd.DataFrame([h.to_dict() for h in result.history])
    write_history(ctx, frame)
    return frame


def pretrain_member(ctx: StageContext, recipe: Recipe, k: int, seed: int, last: bool,
                    images, is_labeled, prior: float | None, train: pd.DataFrame
                    ) -> tuple[dict, pd.DataFrame, Path | None]:
    """Encoder k, pretrained with `seed` (or restored from paths.pretrain_cache): its
    saved model, its per-epoch history, and the cache entry it was restored from. Its
    MLflow curves are `loss`, `lr`, `images_per_s` for the first, `loss_member{k}`, ...
    for the others."""
    suffix = f"_member{k}" if k else ""
    fp = fingerprint(ctx, train, prior, images, seed)
    entry = cache_entry(ctx, fp)
    if restore_from_cache(ctx, entry, checkpoint=last):
        print(f"pucl pretrain: reusing the finished pretraining {entry}", file=sys.stderr)
        frame = read_history(ctx)
        for row in frame.itertuples(index=False):
            ctx.run.log_metrics({f"loss{suffix}": row.loss, f"lr{suffix}": row.lr,
                                 **({f"images_per_s{suffix}": row.images_per_s}
                                    if np.isfinite(row.images_per_s) else {})},
                                step=int(row.epoch))
        reused = entry
    else:
        frame = train_and_save(ctx, recipe, images, is_labeled,
                               ctx.path("pretrain", "checkpoint.pt"), fp, prior, seed, suffix)
        store_in_cache(ctx, entry)
        reused = None
    saved = read_torch(ctx.path("pretrain", "model.pt"), "model",
                       "delete it and its paths.pretrain_cache entry, then rerun pretrain")
    return {**saved, "seed": seed}, frame, reused


def run(ctx: StageContext) -> dict:
    p = ctx.params.pretrain
    manifest = ctx.manifest()
    train = manifest[manifest["split"] == "train"].reset_index(drop=True)
    data = ctx.data()
    images = torch.from_numpy(data.x_train[train["index"].to_numpy()])
    is_labeled = torch.from_numpy(train["pu"].to_numpy() == 1)
    recipe = Recipe.of(ctx.params)
    prior_used, prior_source = loss_prior(ctx, recipe)
    seeds = member_seeds(recipe)
    members, frames, reused = [], [], []
    for k, seed in enumerate(seeds):
        if len(seeds) > 1:
            print(f"pucl pretrain: encoder {k + 1} of {len(seeds)} (seed {seed})",
                  file=sys.stderr)
        saved, frame, entry = pretrain_member(ctx, recipe, k, seed, k == len(seeds) - 1,
                                              images, is_labeled, prior_used, train)
        members.append(saved)
        frames.append(frame.assign(member=k) if len(seeds) > 1 else frame)
        reused.append(entry)
    if len(seeds) > 1:  # the first member stays the model every reader loads by default
        write_torch(ctx.path("pretrain", "model.pt"),
                    {**members[0], "other_members": members[1:]})
        write_history(ctx, pd.concat(frames, ignore_index=True))
    if any(entry is not None for entry in reused):
        ctx.run.set_tags({"pretrain_reused": ", ".join(str(e) for e in reused if e)})
    save_figure(ctx.path("pretrain", "loss.png"), loss_figure(frames, seeds, p.method, p.loss))
    for name in ("history.csv", "loss.png", "model.pt"):
        ctx.run.log_artifact(ctx.path("pretrain", name))
    if prior_source is not None:
        ctx.run.set_tags({"loss_prior_source": prior_source})
    first = frames[0]
    steady = first["images_per_s"].iloc[1:] if len(first) > 1 else first["images_per_s"]
    return {"final_loss": float(first["loss"].iloc[-1]), "epochs": len(first),
            **({"loss_prior": prior_used} if prior_used is not None else {}),
            "images_per_s": float(steady.median()),  # nan when every epoch was resumed
            "train_seconds": float(sum(f["seconds"].sum() for f in frames)),
            "members": len(seeds),
            "reused": float(all(entry is not None for entry in reused))}
    # reused 1: every encoder restored from paths.pretrain_cache (train_seconds: what they
    # cost when they ran); final_loss, epochs, images_per_s: the first encoder's
