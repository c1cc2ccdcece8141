"""Fine-tuning the whole network (docs/classifiers.md, "option to fine-tune"): the pretrained
encoder and the linear head trained together on augmented inputs, with the objective the
head was trained with (cross-entropy on labels, or the uPU / nnPU risk on P vs U).

The head arrives already trained on frozen features, so the first steps do not push
random-head gradients into the encoder; the learning rate decays on a cosine schedule.
Images, indices and the generator live on the training device, and the epoch's loss is
read back once (as in pretraining's loop).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import nn

from pucl.classify.linear import LinearHead, PUBatches
from pucl.classify.pu_risk import PU_RISKS, pu_risk
from pucl.data.augment import normalize, to_unit_float
from pucl.progress import EpochBar
from pucl.runtime import LossSum, adam, epoch_order, on_device


@dataclass(frozen=True)
class FinetuneSettings:
    epochs: int
    lr: float
    weight_decay: float
    batch_size: int


def _views(images: torch.Tensor, idx: torch.Tensor, augment, generator: torch.Generator
           ) -> torch.Tensor:
    return normalize(augment(to_unit_float(images[idx]), generator))


def _ce_objectives(encoder: nn.Module, head: LinearHead, images: torch.Tensor,
                   labels: torch.Tensor, batch_size: int, augment,
                   generator: torch.Generator) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """One epoch of cross-entropy: (objective, value to report) per full batch (BatchNorm
    wants them), each batch's views drawn when it is reached."""
    order = epoch_order(len(images), generator)
    batch = min(batch_size, len(images))
    ce = nn.CrossEntropyLoss()
    for start in range(0, len(images) - batch + 1, batch):
        idx = order[start:start + batch]
        loss = ce(head(encoder(_views(images, idx, augment, generator))).float(), labels[idx])
        yield loss, loss


def _pu_objectives(encoder: nn.Module, head: LinearHead, images: torch.Tensor,
                   positive: torch.Tensor, unlabeled: torch.Tensor, batches: PUBatches,
                   augment, generator: torch.Generator, prior: float, kind: str, beta: float,
                   gamma: float) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """One epoch of the uPU / nnPU risk: (objective, risk) per batch of P and U."""
    for idx_p, idx_u in batches.epoch():
        if len(idx_u) < 2:  # a BatchNorm step needs two rows
            continue
        rows = torch.cat([positive[idx_p], unlabeled[idx_u]])
        scores = head.score(encoder(_views(images, rows, augment, generator))).float()
        result = pu_risk(scores[:len(idx_p)], scores[len(idx_p):], prior, kind, beta, gamma)
        yield result.objective, result.risk


def finetune(
    encoder: nn.Module,
    head: LinearHead,
    images: torch.Tensor,
    settings: FinetuneSettings,
    augment,
    generator: torch.Generator,
    device: torch.device,
    labels: torch.Tensor | None = None,
    positive: torch.Tensor | None = None,
    unlabeled: torch.Tensor | None = None,
    kind: str = "ce",
    prior: float | None = None,
    beta: float = 0.0,
    gamma: float = 1.0,
    progress: bool = True,
) -> list[float]:
    """Train `encoder` and `head` in place; returns the mean loss (CE) or risk (PU) per epoch.

    kind "ce": `labels` {0, 1} for every row of `images`. kind "nnpu" / "upu": `positive`
    and `unlabeled` index rows of `images`, with the class `prior`. `generator` is on
    `device`."""
    if kind != "ce" and kind not in PU_RISKS:
        raise ValueError(f"kind must be 'ce' or one of {PU_RISKS}, got {kind!r}")
    if kind == "ce" and labels is None:
        raise ValueError("kind 'ce' needs labels")
    if kind != "ce" and (positive is None or unlabeled is None or prior is None):
        raise ValueError(f"kind {kind!r} needs positive, unlabeled and prior")
    images, = on_device(device, generator, images)
    encoder.to(device)
    head.to(device)
    optimizer = adam([*encoder.parameters(), *head.parameters()], settings.lr,
                     settings.weight_decay)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=settings.epochs)
    if kind == "ce":
        labels, = on_device(device, generator, labels)
        epoch_objectives = functools.partial(_ce_objectives, encoder, head, images, labels,
                                             settings.batch_size, augment, generator)
    else:
        positive, unlabeled = on_device(device, generator, positive, unlabeled)
        batches = PUBatches(len(positive), len(unlabeled), settings.batch_size, generator)
        epoch_objectives = functools.partial(_pu_objectives, encoder, head, images, positive,
                                             unlabeled, batches, augment, generator, prior,
                                             kind, beta, gamma)
    losses = []
    for _ in EpochBar(settings.epochs, f"fine-tune ({kind})", disable=not progress):
        encoder.train()
        head.train()
        epoch = LossSum()
        for objective, reported in epoch_objectives():
            optimizer.zero_grad(set_to_none=True)
            objective.backward()
            optimizer.step()
            epoch.add(reported)
        schedule.step()
        losses.append(epoch.mean())
    encoder.eval()
    head.eval()
    return losses
