"""The classifier step of the recipe (pure: arrays and modules in, modules out): a head on
one pretrained encoder's features, then optionally encoder and head fine-tuned together,
then optionally neighbour smoothing. What the head learns from is the objective's
business (pucl.classify.objectives); this module only sequences the steps, so the
train_classifier stage and the scikit-learn estimator run the same code."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from pucl.classify.finetune import FinetuneSettings
from pucl.classify.linear import LinearSettings
from pucl.classify.neighbours import NeighbourHead
from pucl.classify.objectives import ClassifierObjective, Targets
from pucl.models import ContrastiveModel
from pucl.models.features import embed, encoder_part


@dataclass(frozen=True)
class ClassifierSettings:
    """The head's training (`head`), what it reads (`features`: encoder | trunk), the
    fine-tuning schedule (0 epochs: frozen encoder) and the smoothing (0: off)."""

    head: LinearSettings
    features: str = "encoder"
    finetune_epochs: int = 0
    finetune_lr: float = 5e-4
    neighbours: int = 0

    @property
    def finetuning(self) -> FinetuneSettings:
        return FinetuneSettings(self.finetune_epochs, self.finetune_lr, self.head.weight_decay,
                                self.head.batch_size)


@dataclass
class Member:
    """One encoder's classifier: its head (smoothed when asked), the fine-tuned encoder's
    weights (None when frozen), the per-epoch losses with their phase (head, finetune),
    and its features of the training rows."""

    head: nn.Module
    encoder_state: dict | None
    losses: list[float]
    features: np.ndarray
    phases: list[str] = field(default_factory=list)


def fit_member(objective: ClassifierObjective, model: ContrastiveModel, images: np.ndarray,
               targets: Targets, settings: ClassifierSettings, augment,
               generator: torch.Generator, device: torch.device, progress: bool = False,
               method_head: nn.Module | None = None) -> Member:
    """Fit `objective` on `model` (fine-tuning changes it in place): `images` are the
    inputs of `targets.rows`; every random draw after the head's initialisation (which
    takes torch's global state) comes from `generator`."""
    features = embed(model, images, settings.features, device)
    head, losses = objective.fit_head(features, targets, settings.head, generator, progress,
                                      method_head)
    phases = ["head"] * len(losses)
    encoder_state = None
    if settings.finetune_epochs > 0:
        tuned = objective.finetune(encoder_part(model.encoder, settings.features), head,
                                   torch.from_numpy(images), targets, settings.finetuning,
                                   augment, generator, device, progress)
        losses, phases = [*losses, *tuned], [*phases, *["finetune"] * len(tuned)]
        head.cpu()
        encoder_state = {n: t.cpu() for n, t in model.encoder.state_dict().items()}
        features = embed(model, images, settings.features, device)
    if settings.neighbours:
        head = NeighbourHead(head, torch.from_numpy(features), settings.neighbours)
    return Member(head, encoder_state, losses, features, phases)


def degenerate(scores: np.ndarray) -> str | None:
    """Why a classifier is degenerate (it calls every training row one class), else None."""
    share = float((scores >= 0.5).mean())
    if 0.0 < share < 1.0:
        return None
    return f"the classifier calls every training row {'positive' if share else 'negative'}"
