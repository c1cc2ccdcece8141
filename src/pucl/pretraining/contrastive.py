"""Contrastive pretraining (pure: no files, no tracking): PUCL, PUNCE and their
relatives on two augmented views per image, in the shared epoch loop
(`pucl.pretraining.loop`, which also defines the checkpoint contract)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from pucl.data.augment import AffineJitter, FeatureNoise, augmented_views, view_draws
from pucl.losses import CONTRASTIVE_LOSSES, ContrastiveLoss
from pucl.pretraining.base import (
    PRETRAINING_METHODS,
    PretrainingMethod,
    PretrainJob,
    PretrainResult,
)
from pucl.pretraining.loop import (
    EpochStats,
    TrainingLoop,
    full_batch_size,
)
from pucl.runtime.device import on_device
from pucl.runtime.step_graph import GraphedStep

__all__ = ["Contrastive", "EpochStats", "PretrainSettings", "train_contrastive"]


@dataclass(frozen=True)
class PretrainSettings:
    epochs: int
    batch_size: int
    lr: float
    weight_decay: float


def train_contrastive(
    model: torch.nn.Module,
    loss_fn: ContrastiveLoss,
    images: torch.Tensor,
    is_labeled: torch.Tensor,
    augment: AffineJitter | FeatureNoise,
    settings: PretrainSettings,
    generator: torch.Generator,
    device: torch.device,
    resume: dict | None = None,
    on_epoch: Callable[[EpochStats, dict], None] | None = None,
    progress: bool = True,
) -> list[EpochStats]:
    """images: uint8 [n, c, h, w] or float features [n, d] (kept on the device for the
    whole training); is_labeled: bool [n]; `generator` on `device`."""
    images, is_labeled = on_device(device, generator, images, is_labeled)
    n = images.shape[0]
    batch = full_batch_size(n, settings.batch_size)
    model.to(device)
    loop = TrainingLoop(model.parameters(), settings.epochs, settings.lr,
                        settings.weight_decay, modules=(model,))

    def learn(idx: torch.Tensor, *draws: torch.Tensor) -> torch.Tensor:
        half = len(draws) // 2  # each view's random numbers, drawn outside
        v1, v2 = augmented_views(images, idx, augment, [draws[:half], draws[half:]])
        z = model(torch.cat([v1, v2]))
        return loop.backward_step(loss_fn(z[:batch], z[batch:], is_labeled[idx]))

    learn_graphed = GraphedStep(learn)  # one CUDA graph on a GPU; a plain call elsewhere

    def step(epoch: int, idx: torch.Tensor) -> torch.Tensor:
        first, second = view_draws(augment, images, len(idx), generator, views=2)
        return learn_graphed(idx, *first, *second)

    return loop.run(n, batch, generator, step,
                    state=lambda: {"model": model.state_dict()},
                    load_state=lambda r: model.load_state_dict(r["model"]),
                    resume=resume, on_epoch=on_epoch, progress=progress)


@PRETRAINING_METHODS.register("contrastive")
class Contrastive(PretrainingMethod):
    """The contrastive objective of pretrain.loss (PUCL by default); PUPL and a head follow."""

    def uses_prior(self, loss: str) -> bool:
        return loss in CONTRASTIVE_LOSSES.names(tag="needs_prior")

    def train(self, job: PretrainJob) -> PretrainResult:
        settings = PretrainSettings(job.epochs, job.batch_size, job.lr, job.weight_decay)
        return PretrainResult(train_contrastive(
            job.model, job.loss_fn, job.images, job.is_labeled, job.augment, settings,
            job.generator, job.device, resume=job.resume, on_epoch=job.on_epoch,
            progress=job.progress))
