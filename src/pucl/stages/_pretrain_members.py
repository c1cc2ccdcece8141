"""The pretrain stage's encoders: one trained into a directory, and several trained side by
side in worker processes (`pretrain.members` > 1 with `base.fit_workers` > 1 on the CPU;
pucl.runtime.parallel has the plan and why two 1-thread processes beat one 2-thread one).

A worker trains member k into its own folder under the stage's directory
(`.member<k>/`): its checkpoint after every epoch, then `model.pt` and its history. A
rerun resumes an unfinished member from either checkpoint, its folder's or the stage's
`checkpoint.pt`, whichever way it trains now. Files pass the results back, not the
worker's pipe, and the stage reads them with the weights-only reader like any other.
Its epochs reach MLflow when the member is done (pucl.stages.pretrain logs them), not
live.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from pucl.artifacts.models import describe_model
from pucl.artifacts.pretraining import (
    CACHED_FILES,
    TIMING_FILE,
    load_resume_state,
    write_history,
)
from pucl.io import atomic_path, read_torch, write_torch
from pucl.pretraining.loop import EpochStats
from pucl.recipe import Recipe
from pucl.recipe.pretraining import pretrain
from pucl.runtime.parallel import plan, run_jobs


def member_directory(out: Path, k: int) -> Path:
    """Where a worker trains member k: hidden beside the stage's own files."""
    return out / f".member{k}"


def train_into(directory: Path, recipe: Recipe, images: torch.Tensor,
               is_labeled: torch.Tensor, prior: float | None, seed: int, fp: str,
               device: torch.device, progress: bool = False,
               on_epoch: Callable[[EpochStats], None] | None = None) -> pd.DataFrame:
    """One encoder pretrained with `seed` into `directory`: checkpoint.pt after every
    epoch (resumed from when its fingerprint is `fp`), then model.pt and the history,
    which is returned. `on_epoch(stats)` hears each epoch after its checkpoint."""
    checkpoint = directory / "checkpoint.pt"

    def save(stats: EpochStats, state: dict) -> None:
        write_torch(checkpoint, {**state, "fingerprint": fp})
        if on_epoch is not None:
            on_epoch(stats)

    model, result = pretrain(recipe, images, is_labeled, prior, seed, device, progress,
                             load_resume_state(checkpoint, fp), save)
    write_torch(directory / "model.pt", {
        **describe_model(model), "loss": recipe.pretrain.loss, "method": recipe.pretrain.method,
        "classifier": result.classifier, "seed": seed})
    frame = pd.DataFrame([h.to_dict() for h in result.history])
    write_history(directory, frame)
    return frame


def adopt_checkpoint(source: Path, target: Path, fp: str) -> None:
    """Let an unfinished training resume where its member trains now: copy the checkpoint
    at `source` to `target` when it is that member's (fingerprint `fp`) and `target`
    holds no checkpoint of it (a run stopped while training here, rerun side by side, or
    the reverse)."""
    def holds(path: Path) -> bool:
        try:
            return read_torch(path, "checkpoint", "delete it").get("fingerprint") == fp
        except Exception:  # missing, unreadable or foreign: nothing to resume from here
            return False

    if not holds(target) and holds(source):
        with atomic_path(target) as tmp:
            shutil.copyfile(source, tmp)


def train_here(out: Path, k: int, recipe: Recipe, images: torch.Tensor,
               is_labeled: torch.Tensor, prior: float | None, seed: int, fp: str,
               device: torch.device, progress: bool = False,
               on_epoch: Callable[[EpochStats], None] | None = None) -> pd.DataFrame:
    """Member k trained in this process into the stage's directory (`train_into`),
    resuming what a worker left unfinished in its folder, which goes afterwards."""
    folder = member_directory(out, k)
    adopt_checkpoint(folder / "checkpoint.pt", out / "checkpoint.pt", fp)
    frame = train_into(out, recipe, images, is_labeled, prior, seed, fp, device, progress,
                       on_epoch)
    shutil.rmtree(folder, ignore_errors=True)
    return frame


def _train_in_worker(directory: str, recipe: Recipe, images: np.ndarray,
                     is_labeled: np.ndarray, prior: float | None, seed: int, fp: str,
                     device: torch.device) -> None:
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    train_into(path, recipe, torch.from_numpy(images), torch.from_numpy(is_labeled), prior,
               seed, fp, device)


def side_by_side(out: Path, recipe: Recipe, images: torch.Tensor, is_labeled: torch.Tensor,
                 prior: float | None, todo: Sequence[tuple[int, int, str]],
                 device: torch.device, workers: int, threads: int,
                 progress: bool = False) -> list[int]:
    """Train the members `todo` names, (k, seed, fingerprint) each, side by side when
    `plan` gives them more than one process: the ks trained, each in
    member_directory(out, k); none when they are better trained one after the other."""
    processes, each = plan(len(todo), workers, threads, device)
    if processes == 1:
        return []
    print(f"pucl pretrain: {len(todo)} encoders side by side in {processes} processes of "
          f"{each} thread{'s' if each > 1 else ''}", file=sys.stderr)
    for k, _, fp in todo:  # a member stopped while training here resumes in its worker
        member_directory(out, k).mkdir(parents=True, exist_ok=True)
        adopt_checkpoint(out / "checkpoint.pt", member_directory(out, k) / "checkpoint.pt", fp)
    jobs = [(str(member_directory(out, k)), recipe, images.numpy(), is_labeled.numpy(), prior,
             seed, fp, device) for k, seed, fp in todo]
    run_jobs(_train_in_worker, jobs, workers, threads, device, "pretrain encoders", progress)
    return [k for k, _, _ in todo]


def take_member(out: Path, k: int) -> None:
    """Put member k's files where a member trained in this process leaves them, the
    stage's directory (taken in member order, so the last member's checkpoint stays, as
    when they train one after the other), and drop its folder."""
    directory = member_directory(out, k)
    for name in (*CACHED_FILES, TIMING_FILE):
        with atomic_path(out / name) as tmp:
            shutil.copyfile(directory / name, tmp)
    shutil.rmtree(directory)
