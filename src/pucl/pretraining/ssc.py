"""SSC self-training with class prototypes (paper 003, Algorithm 3.1) for PU data.

Per batch: the labelled positives (one view), two augmented views of each unlabeled
sample, and K = 2 trainable prototypes (negative, positive) go through one weighted
SupCon (eq. 7-9). An unlabeled sample takes the class of the prototype softmax of its
un-augmented ("weak") view when that is more confident than `threshold` (eq. 5-6), and a
label of its own otherwise, so that its two views are each other's only positive (as in
SimCLR). PU gives no labelled negative: the negative prototype learns only from confident
pseudo-negatives and from being pushed away from the positives. With a class prior
(`SSCSettings.prior`, pretrain.ssc.negatives: prior_rank) the least positive share of
each batch's U is labelled negative as well (ours, not the paper's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from pydantic import Field

from pucl.classify.heads import describe
from pucl.classify.prototype import PrototypeHead
from pucl.data.augment import normalize, to_unit_float
from pucl.losses.ssc import (
    prior_ranked_negatives,
    prototype_probabilities,
    unlabeled_targets,
    weighted_supcon,
)
from pucl.pretraining.base import (
    PRETRAINING_METHODS,
    PretrainingMethod,
    PretrainJob,
    PretrainResult,
)
from pucl.pretraining.loop import EpochStats, TrainingLoop, full_batch_size
from pucl.registry import EntryParams
from pucl.runtime.device import on_device

NEGATIVE, POSITIVE = 0, 1


@dataclass(frozen=True)
class SSCSettings:
    epochs: int
    batch_size: int
    lr: float
    weight_decay: float
    temperature: float = 0.1  # T of the SupCon (eq. 8)
    proto_temperature: float = 0.1  # T' of the prototype softmax (eq. 6)
    threshold: float = 0.95  # tau of eq. 5
    weight_labeled: float = 1.0  # lambda^x (eq. 9)
    weight_confident: float = 1.0  # lambda^{u up}
    weight_unconfident: float = 1.0  # lambda^{u down}
    weight_prototypes: float = 1.0  # lambda^c
    # PU-aware pseudo-negatives (not in paper 003): each batch's least positive
    # (1 - prior) share of U is labelled negative; None keeps the paper's eq. 5 only
    prior: float | None = None


def ssc_batch(model, prototypes: torch.Tensor, x_labeled, u_view1, u_view2, u_weak,
              settings: SSCSettings) -> tuple[torch.Tensor, float]:
    """The SSC loss of one batch and the confident share of its unlabeled samples."""
    with torch.no_grad():
        probs = prototype_probabilities(model(u_weak).float(), prototypes,
                                        settings.proto_temperature)
    y_u, confident = unlabeled_targets(probs, settings.threshold)
    if settings.prior is not None:
        ranked = prior_ranked_negatives(probs[:, POSITIVE], 1.0 - settings.prior)
        y_u = torch.where(ranked, NEGATIVE, y_u)
        confident = confident | ranked
    z = model(torch.cat([x_labeled, u_view1, u_view2])) if len(x_labeled) else \
        model(torch.cat([u_view1, u_view2]))
    z = torch.cat([z.float(), prototypes])
    n_x = len(x_labeled)
    y_x = torch.full((n_x,), POSITIVE, dtype=torch.long, device=z.device)
    y_c = torch.tensor([NEGATIVE, POSITIVE], device=z.device)
    labels = torch.cat([y_x, y_u, y_u, y_c])
    w_u = torch.where(confident, settings.weight_confident, settings.weight_unconfident)
    weights = torch.cat([torch.full((n_x,), settings.weight_labeled, device=z.device),
                         w_u, w_u, torch.full((2,), settings.weight_prototypes,
                                              device=z.device)]).to(z.dtype)
    loss = weighted_supcon(z, labels, weights, settings.temperature)
    return loss, float(confident.float().mean()) if len(confident) else 0.0


def train_ssc(model, prototypes: torch.nn.Parameter, images: torch.Tensor,
              is_labeled: torch.Tensor, augment, settings: SSCSettings,
              generator: torch.Generator, device: torch.device, resume: dict | None = None,
              on_epoch=None, progress: bool = True) -> list[EpochStats]:
    """Train `model` (encoder + projector) and `prototypes` [2, proj_dim] in place, in the
    shared epoch loop (same checkpoint contract as `train_contrastive`)."""
    n = len(images)
    batch = full_batch_size(n, settings.batch_size)
    images, labeled_all = on_device(device, generator, images, is_labeled.bool())
    model.to(device)
    prototypes.data = prototypes.data.to(device)
    loop = TrainingLoop([*model.parameters(), prototypes], settings.epochs, settings.lr,
                        settings.weight_decay, modules=(model,), desc="ssc")
    shares: list[float] = []  # confident share of U per batch, for the progress bar

    def step(epoch: int, idx: torch.Tensor) -> float | None:
        x = to_unit_float(images[idx])
        lab = labeled_all[idx]
        x_l, x_u = x[lab], x[~lab]
        if len(x_u) < 2:
            return None
        views_l = normalize(augment(x_l, generator)) if len(x_l) else x_l
        loss, share = ssc_batch(
            model, prototypes, views_l, normalize(augment(x_u, generator)),
            normalize(augment(x_u, generator)), normalize(x_u), settings)
        shares.append(share)
        return loop.backward_step(loss)

    def load_state(resume: dict) -> None:
        model.load_state_dict(resume["model"])
        prototypes.data.copy_(resume["prototypes"])

    def postfix(stats: EpochStats) -> dict:
        confident = sum(shares) / max(len(shares), 1)
        shares.clear()
        return {"loss": f"{stats.loss:.4f}", "confident": f"{confident:.2f}"}

    return loop.run(n, batch, generator, step,
                    state=lambda: {"model": model.state_dict(),
                                   "prototypes": prototypes.detach().cpu().clone()},
                    load_state=load_state, resume=resume, on_epoch=on_epoch,
                    postfix=postfix, progress=progress)


class SSCParams(EntryParams):
    """pretrain.ssc: paper 003 with K = 2 prototypes; weights lambda of eq. 9 by anchor."""

    temperature: float = Field(0.1, gt=0.0, description="SupCon temperature T (eq. 8)")
    proto_temperature: float = Field(0.1, gt=0.0, description="prototype softmax T' (eq. 6)")
    threshold: float = Field(0.95, gt=0.5, lt=1.0, description="confidence tau (eq. 5)")
    weight_labeled: float = Field(1.0, ge=0.0)
    weight_confident: float = Field(1.0, ge=0.0)
    weight_unconfident: float = Field(1.0, ge=0.0)
    weight_prototypes: float = Field(1.0, ge=0.0)
    # confident: the paper's eq. 5 alone (PU data gives the negative prototype no member);
    # prior_rank: also label each batch's least positive (1 - prior) share of U negative,
    # with the prior of pretrain.prior (ours, not paper 003's)
    negatives: Literal["confident", "prior_rank"] = "confident"


@PRETRAINING_METHODS.register("ssc", params=SSCParams)
class SSC(PretrainingMethod):
    """SSC (paper 003): prototype self-training; its two prototypes are the classifier."""

    def __init__(self, temperature: float = 0.1, proto_temperature: float = 0.1,
                 threshold: float = 0.95, weight_labeled: float = 1.0,
                 weight_confident: float = 1.0, weight_unconfident: float = 1.0,
                 weight_prototypes: float = 1.0, negatives: str = "confident"):
        self.options = {"temperature": temperature, "proto_temperature": proto_temperature,
                        "threshold": threshold, "weight_labeled": weight_labeled,
                        "weight_confident": weight_confident,
                        "weight_unconfident": weight_unconfident,
                        "weight_prototypes": weight_prototypes}
        self.negatives = negatives

    def uses_prior(self, loss: str) -> bool:
        return self.negatives == "prior_rank"

    def train(self, job: PretrainJob) -> PretrainResult:
        proj_dim = job.proj_dim
        prototypes = torch.nn.Parameter(torch.nn.functional.normalize(
            torch.randn(2, proj_dim, generator=job.generator, device=job.generator.device),
            dim=1))
        settings = SSCSettings(job.epochs, job.batch_size, job.lr, job.weight_decay,
                               **self.options,
                               prior=job.prior if self.uses_prior("") else None)
        history = train_ssc(job.model, prototypes, job.images, job.is_labeled, job.augment,
                            settings, job.generator, job.device, resume=job.resume,
                            on_epoch=job.on_epoch, progress=job.progress)
        head = PrototypeHead(job.model.encoder.out_dim, job.proj_hidden, proj_dim,
                             self.options["proto_temperature"])
        head.projector.load_state_dict(job.model.head.state_dict())
        head.prototypes.data.copy_(prototypes.detach().cpu())
        return PretrainResult(history, describe(head))
