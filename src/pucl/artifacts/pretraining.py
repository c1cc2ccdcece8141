"""The pretraining's files: the checkpoint a rerun resumes from, the cache of finished
encoders, and the per-epoch history.

A checkpoint (`checkpoint.pt`, rewritten atomically after every epoch) and a cache entry
(`paths.pretrain_cache/<fingerprint>/`) are used only when their fingerprint matches:
the settings that shape training (`pucl.recipe.pretraining.encoder_identity`), the split,
the training inputs' content (a file edited in place keeps its rows but not its pixels),
the training code, the prior a loss reads, and the device (a CUDA encoder is not the
CPU's, so neither is reused or resumed by a run on the other). Resuming is bit-identical
to an uninterrupted run; any other checkpoint is ignored and training starts over.

`history.csv` holds what each epoch computed (no clock time, so the same training run
again leaves it, and dvc.lock, unchanged); `timing.csv` beside it what each epoch took.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import torch

import pucl.data.augment as augment_module
import pucl.recipe as recipe_package
import pucl.recipe.pretraining as recipe_module
from pucl.errors import DataError
from pucl.io import atomic_path, read_torch, write_table
from pucl.recipe import Recipe
from pucl.recipe.by_input import for_inputs
from pucl.recipe.pretraining import encoder_identity, resolve_encoder
from pucl.runtime.device import resolve_device

if TYPE_CHECKING:
    from pucl.params.config import Params

# Code whose change must invalidate a checkpoint or a cached encoder (it shapes what an
# epoch computes): these packages whole, the augmentations and the recipe's pretraining.
TRAINING_PACKAGES = ("pucl.pretraining", "pucl.losses", "pucl.models")
TRAINING_MODULES = (augment_module, recipe_package, recipe_module)
CACHED_FILES = ("model.pt", "history.csv", "checkpoint.pt")
# Clock times per epoch: not a DVC output (a rerun of the same training must leave every
# output, and so dvc.lock, unchanged), kept beside history.csv and in the cache entry.
TIMING_FILE = "timing.csv"
OUTCOME_COLUMNS = ["epoch", "loss", "lr"]
TIMING_COLUMNS = ["epoch", "seconds", "images_per_s", "gmac"]


def training_code_files() -> list[Path]:
    """Every file of TRAINING_PACKAGES and TRAINING_MODULES, in a fixed order."""
    files = [Path(m.__file__) for m in TRAINING_MODULES]
    for name in TRAINING_PACKAGES:
        package = Path(importlib.import_module(name).__file__).parent
        files.extend(sorted(package.rglob("*.py")))
    return files


def fingerprint(params: Params, manifest: pd.DataFrame, prior: float | None,
                images: torch.Tensor, seed: int | None = None) -> str:
    """What a resumable checkpoint or a cached encoder pretrained with `seed` must match
    (the module's docstring)."""
    code = hashlib.sha256(b"".join(f.read_bytes() for f in training_code_files()))
    content = hashlib.sha256(np.ascontiguousarray(images.numpy()).data).hexdigest()
    # the `auto` settings decided for these inputs: a change of what `auto` means (the
    # loss, the epochs) trains a new encoder instead of restoring the old one
    key = encoder_identity(for_inputs(Recipe.of(params), images.shape[1:], len(images)), seed)
    key["pretrain"]["encoder"] = resolve_encoder(params.pretrain.encoder, images.shape[1:])
    key.update({"data": params.data.model_dump(), "manifest": hashlib.sha256(
        pd.util.hash_pandas_object(manifest, index=False).to_numpy().tobytes()).hexdigest(),
        "inputs": content, "code": code.hexdigest(), "prior": prior,
        "device": resolve_device(params.base.device).type})
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def load_resume_state(path: Path, expected: str) -> dict | None:
    """The checkpoint at `path` when its fingerprint is `expected`, else None (training
    starts over); a file pucl did not write is refused."""
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


def write_history(directory: Path, frame: pd.DataFrame) -> None:
    """history.csv (what each epoch computed) and timing.csv (what it took)."""
    member = ["member"] if "member" in frame else []
    write_table(directory / "history.csv", frame[OUTCOME_COLUMNS + member])
    timing = [c for c in TIMING_COLUMNS if c in frame]  # gmac: absent from older caches
    write_table(directory / TIMING_FILE, frame[timing + member])


def read_history(directory: Path) -> pd.DataFrame:
    """history.csv with its timing.csv beside it (nan times where that is missing)."""
    frame = pd.read_csv(directory / "history.csv")
    timing = directory / TIMING_FILE
    if timing.is_file():
        return frame.merge(pd.read_csv(timing), on=["epoch", *(["member"] if "member" in frame
                                                              else [])], how="left")
    return frame.assign(seconds=np.nan, images_per_s=np.nan)


def history_metrics(frames: list[pd.DataFrame]) -> dict:
    """The first encoder's final loss, epochs and median images/s after its first epoch
    (nan when every epoch was resumed), and the seconds and work (GMACs, nan where an
    epoch's was not recorded) every encoder took."""
    first = frames[0]
    steady = first["images_per_s"].iloc[1:] if len(first) > 1 else first["images_per_s"]
    return {"final_loss": float(first["loss"].iloc[-1]), "epochs": len(first),
            "images_per_s": float(steady.median()),
            "train_seconds": float(sum(f["seconds"].sum() for f in frames)),
            "train_gmac": float(sum(f["gmac"].sum(skipna=False) if "gmac" in f else np.nan
                                    for f in frames))}


def is_cached(entry: Path | None) -> bool:
    """Whether a cache entry holds a finished pretraining."""
    return entry is not None and all((entry / name).is_file() for name in CACHED_FILES)


def restore_from_cache(entry: Path | None, directory: Path, checkpoint: bool = True) -> bool:
    """Copy a cached pretraining into `directory`; without `checkpoint`, leave
    checkpoint.pt alone (it may hold a later member's unfinished training)."""
    if not is_cached(entry):
        return False
    names = [*(CACHED_FILES if checkpoint else CACHED_FILES[:2]), TIMING_FILE]
    for name in names:
        if (entry / name).is_file():
            with atomic_path(directory / name) as tmp:
                shutil.copyfile(entry / name, tmp)
        else:  # entries cached before timing.csv existed lack it: no stale times either
            (directory / name).unlink(missing_ok=True)
    return True


def store_in_cache(entry: Path | None, directory: Path) -> None:
    """Best effort: the cache only saves time, so a full disk here warns, not fails."""
    if entry is None or entry.exists():
        return
    staging = entry.with_name(f"{entry.name}.tmp-{os.getpid()}")
    try:
        staging.mkdir(parents=True, exist_ok=True)
        for name in (*CACHED_FILES, TIMING_FILE):
            shutil.copyfile(directory / name, staging / name)
        os.replace(staging, entry)  # complete or absent, never half-written
    except OSError as exc:
        if not entry.exists():  # a parallel run filling the same entry first is fine
            print(f"pucl pretrain: warning: not cached in {entry.parent} ({exc})",
                  file=sys.stderr)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
