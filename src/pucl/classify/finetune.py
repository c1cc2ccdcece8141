"""Fine-tuning the whole network (docs/classifiers.md, "option to fine-tune"): the pretrained
encoder and the linear head trained together on augmented inputs, with the objective the
head was trained with (cross-entropy on labels, or the uPU / nnPU risk on P vs U).

The head arrives already trained on frozen features, so the first steps do not push
random-head gradients into the encoder; the learning rate decays on a cosine schedule.
Images, indices and the generator live on the training device, each step is one CUDA graph
on a GPU (pucl.runtime.step_graph), and the epoch's loss is read back once (as in pretraining's
loop).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from torch import nn

from pucl.classify.linear import LinearHead, PUBatches
from pucl.classify.pu_risk import PU_RISKS, pu_risk
from pucl.data.augment import augmented_views, view_draws
from pucl.losses.noncontrastive import noisncl_loss
from pucl.runtime.device import LossSum, adam, descend, epoch_order, on_device
from pucl.runtime.progress import EpochBar
from pucl.runtime.step_graph import GraphedStep


@dataclass(frozen=True)
class FinetuneSettings:
    epochs: int
    lr: float
    weight_decay: float
    batch_size: int


# an objective maps a batch's inputs to (what to minimise, what to report); an epoch's
# inputs are those tuples, random draws included, made outside the recorded step
Objective = Callable[..., tuple[torch.Tensor, torch.Tensor]]
EpochInputs = Callable[[], Iterator[tuple[torch.Tensor, ...]]]


def _ce_steps(encoder: nn.Module, head: LinearHead, images: torch.Tensor,
              labels: torch.Tensor, batch_size: int, augment,
              generator: torch.Generator) -> tuple[Objective, EpochInputs]:
    """Cross-entropy: the objective (its loss twice: minimised and reported) and an
    epoch's inputs, one per full batch (BatchNorm wants them)."""
    ce = nn.CrossEntropyLoss()

    def learn(idx: torch.Tensor, *draws: torch.Tensor):
        views, = augmented_views(images, idx, augment, [draws])
        loss = ce(head(encoder(views)).float(), labels[idx])
        return loss, loss

    def epoch():
        order = epoch_order(len(images), generator)
        batch = min(batch_size, len(images))
        for start in range(0, len(images) - batch + 1, batch):
            draws, = view_draws(augment, images, batch, generator)
            yield (order[start:start + batch], *draws)

    return learn, epoch


def pseudo_label_pairs(features: torch.Tensor, scores: torch.Tensor, n_p: int
                       ) -> torch.Tensor:
    """NoiSNCL (paper 001 eq. 7) over a batch's pairs of rows that share a pseudo-label:
    the first n_p rows (labelled positives) are positive, the others take the head's
    current call (score > 0). Each row is pulled towards the detached features of the
    other rows of its label; a row is not its own pair."""
    label = torch.cat([torch.ones(n_p, dtype=torch.bool, device=scores.device),
                       scores[n_p:].detach() > 0])
    same = label[:, None] == label[None, :]
    same.fill_diagonal_(False)
    return noisncl_loss(features, features, same)


def _pu_steps(encoder: nn.Module, head: LinearHead, images: torch.Tensor,
              positive: torch.Tensor, unlabeled: torch.Tensor, batches: PUBatches,
              augment, generator: torch.Generator, prior: float, kind: str, beta: float,
              gamma: float, entropy: float, pairs: float) -> tuple[Objective, EpochInputs]:
    """A PU risk (uPU, nnPU, dist), plus `pairs` times `pseudo_label_pairs` when above 0:
    the objective (minimised, and the risk reported) and an epoch's inputs, one per batch
    of P and U."""

    def learn(idx_p: torch.Tensor, idx_u: torch.Tensor, *draws: torch.Tensor):
        rows = torch.cat([positive[idx_p], unlabeled[idx_u]])
        views, = augmented_views(images, rows, augment, [draws])
        features = encoder(views)
        scores = head.score(features).float()
        result = pu_risk(scores[:len(idx_p)], scores[len(idx_p):], prior, kind, beta, gamma,
                         entropy)
        if pairs > 0:
            pulled = pseudo_label_pairs(features.float(), scores, len(idx_p))
            return result.objective + pairs * pulled, result.risk
        return result.objective, result.risk

    def epoch():
        for idx_p, idx_u in batches.epoch():
            if len(idx_u) < 2:  # a BatchNorm step needs two rows
                continue
            draws, = view_draws(augment, images, len(idx_p) + len(idx_u), generator)
            yield (idx_p, idx_u, *draws)

    return learn, epoch


def _check_kind(kind: str, has_labels: bool, has_pu_rows: bool) -> None:
    if kind != "ce" and kind not in PU_RISKS:
        raise ValueError(f"kind must be 'ce' or one of {PU_RISKS}, got {kind!r}")
    if kind == "ce" and not has_labels:
        raise ValueError("kind 'ce' needs labels")
    if kind != "ce" and not has_pu_rows:
        raise ValueError(f"kind {kind!r} needs positive, unlabeled and prior")


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
    entropy: float = 0.0, pairs: float = 0.0,
) -> list[float]:
    """Train `encoder` and `head` in place; returns the mean loss (CE) or risk (PU) per epoch.

    kind "ce": `labels` {0, 1} for every row of `images`. A PU risk kind: `positive`
    and `unlabeled` index rows of `images`, with the class `prior`. `generator` is on
    `device`."""
    _check_kind(kind, labels is not None,
                all(x is not None for x in (positive, unlabeled, prior)))
    images, = on_device(device, generator, images)
    encoder.to(device)
    head.to(device)
    optimizer = adam([*encoder.parameters(), *head.parameters()], settings.lr,
                     settings.weight_decay)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=settings.epochs)
    if kind == "ce":
        labels, = on_device(device, generator, labels)
        objective, epoch_inputs = _ce_steps(encoder, head, images, labels,
                                            settings.batch_size, augment, generator)
    else:
        positive, unlabeled = on_device(device, generator, positive, unlabeled)
        batches = PUBatches(len(positive), len(unlabeled), settings.batch_size, generator)
        objective, epoch_inputs = _pu_steps(encoder, head, images, positive, unlabeled,
                                            batches, augment, generator, prior, kind, beta,
                                            gamma, entropy, pairs)

    @GraphedStep  # one CUDA graph per batch shape on a GPU; a plain call elsewhere
    def learn(*inputs: torch.Tensor) -> torch.Tensor:
        minimised, reported = objective(*inputs)
        descend(optimizer, minimised)
        return reported.detach()

    losses = []
    for _ in EpochBar(settings.epochs, f"fine-tune ({kind})", disable=not progress):
        encoder.train()
        head.train()
        epoch = LossSum()
        for inputs in epoch_inputs():
            epoch.add(learn(*inputs))
        schedule.step()
        losses.append(epoch.mean())
    encoder.eval()
    head.eval()
    return losses
