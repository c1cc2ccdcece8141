"""What every pretraining method is: an entry of PRETRAINING_METHODS (`pretrain.method`),
built with its own settings (`pretrain.<name>`), that says whether it needs the class
prior and trains a `ContrastiveModel` in place from a `PretrainJob`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from pucl.registry import Registry

PRETRAINING_METHODS = Registry("pretraining method", "pucl.pretraining")


@dataclass
class PretrainJob:
    """Everything a method trains with; the stage fills it from params and files."""

    model: torch.nn.Module  # ContrastiveModel: encoder + projection head, trained in place
    loss_fn: Any  # the contrastive objective of pretrain.loss (methods may ignore it)
    images: torch.Tensor  # uint8 [n, c, h, w] or float [n, d]
    is_labeled: torch.Tensor  # bool [n]
    augment: Any
    epochs: int
    batch_size: int
    lr: float
    weight_decay: float
    proj_dim: int
    proj_hidden: int
    prior: float | None  # only for methods whose uses_prior() is true
    generator: torch.Generator
    device: torch.device
    resume: dict | None = None
    on_epoch: Callable[..., None] | None = None
    progress: bool = True


@dataclass
class PretrainResult:
    history: list  # EpochStats per epoch
    classifier: dict | None = None  # a head description (classify.heads.describe), if any


class PretrainingMethod:
    """Base of the registered methods."""

    def uses_prior(self, loss: str) -> bool:
        """Whether `train` reads job.prior (given the configured pretrain.loss)."""
        return False

    def train(self, job: PretrainJob) -> PretrainResult:
        raise NotImplementedError
