"""Phantom label disambiguation of NcPU (paper 001, section 3.2; Algorithm 1).

Pure state updates, one mini-batch at a time, with the paper's names:
- class-conditional prototypes mu_c: a normalised moving average of the online
  embeddings of the samples the classifier assigns to class c (eq. 9), one sample after
  the other as in Algorithm 1 (lines 6-8);
- phantom pseudo targets: s' moves towards the one-hot nearest prototype (eq. 10); an
  unlabeled sample's target s is the negative one-hot while the classifier's negative
  probability f_1(x) reaches the threshold tau, and s' otherwise (eq. 11). Labelled
  positives keep [1, 0];
- the self-adaptive threshold tau (eq. 12-13): EMAs of the batch's mean max-probability
  and of each class's mean probability, both starting at 0.5.

Class index 0 is positive and 1 negative, as in the paper's targets [1, 0] / [0, 1].
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from pucl.classify.heads import describe
from pucl.losses.noncontrastive import noisncl_loss
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
    two_views,
)
from pucl.registry import EntryParams
from pucl.runtime.device import on_device

POSITIVE, NEGATIVE = 0, 1


def update_prototypes(prototypes: torch.Tensor, q: torch.Tensor, assigned: torch.Tensor,
                      alpha: float) -> torch.Tensor:
    """Eq. 9 applied sample by sample: prototypes [2, d] (unit rows), q [b, d] online
    embeddings, assigned [b] classifier classes. Returns the new prototypes."""
    mu = prototypes.detach().clone()
    q_unit = F.normalize(q.detach(), dim=1)
    for z, c in zip(q_unit, assigned.tolist(), strict=True):
        mu[c] = F.normalize(alpha * mu[c] + (1.0 - alpha) * z, dim=0)
    return mu


def phantom_targets(s_prime: torch.Tensor, q: torch.Tensor, prototypes: torch.Tensor,
                    negative_prob: torch.Tensor, tau: float, beta: float,
                    labeled: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eq. 10-11 for one batch. s_prime [b, 2] the samples' running targets; q [b, d];
    negative_prob [b] = f_1(x); labeled [b] bool. Returns (s, new s_prime)."""
    nearest = (F.normalize(q.detach(), dim=1) @ prototypes.T).argmax(dim=1)
    r = F.one_hot(nearest, 2).to(s_prime.dtype)
    new_prime = beta * s_prime + (1.0 - beta) * r
    negative = torch.tensor([0.0, 1.0], dtype=s_prime.dtype).expand_as(new_prime)
    s = torch.where((negative_prob >= tau).view(-1, 1), negative, new_prime)
    positive = torch.tensor([1.0, 0.0], dtype=s_prime.dtype).expand_as(new_prime)
    s = torch.where(labeled.view(-1, 1), positive, s)
    new_prime = torch.where(labeled.view(-1, 1), positive, new_prime)
    return s, new_prime


@dataclass
class SelfAdaptiveThreshold:
    """tau~ and rho~ of eq. 12, both initialised to 0.5; `tau` is eq. 13."""

    gamma: float
    global_level: float = 0.5
    class_level: list[float] = field(default_factory=lambda: [0.5, 0.5])

    def update(self, probs: torch.Tensor) -> float:
        """probs: [b, 2] softmax outputs of one batch. Returns the new tau."""
        p = probs.detach().to(torch.float64)
        g = self.gamma
        self.global_level = g * self.global_level + (1 - g) * float(p.max(dim=1).values.mean())
        means = p.mean(dim=0).tolist()
        self.class_level = [g * old + (1 - g) * m for old, m in
                            zip(self.class_level, means, strict=True)]
        return self.tau

    @property
    def tau(self) -> float:
        rho = self.class_level
        return rho[NEGATIVE] / max(rho) * self.global_level


# ---------------------------------------------------------------------------------------
# The NcPU training method: Algorithm 1 with the loss of eq. 14.


@dataclass(frozen=True)
class NcPUSettings:
    epochs: int
    batch_size: int
    lr: float
    weight_decay: float
    alpha: float = 0.99  # prototype momentum (eq. 9)
    beta: float = 0.99  # phantom target momentum (eq. 10)
    gamma: float = 0.99  # self-adaptive threshold momentum (eq. 12)
    ema: float = 0.99  # target network momentum (BYOL's eta)
    w_r: float = 50.0  # weight of NoiSNCL in eq. 14
    w_ent: float = 5.0  # weight of the entropy regulariser
    warmup_epochs: int = 30  # pseudo targets fixed, and pairs only within a sample


class NcPUNetwork(torch.nn.Module):
    """Online network: encoder g, projector h, predictor p; classifier f on g(x). The
    encoder and projector keep ContrastiveModel's layout, so every later stage reads them
    as a pretrained model; f is a LinearHead (logits [negative, positive])."""

    def __init__(self, model: torch.nn.Module, proj_dim: int, hidden: int):
        from pucl.classify.linear import LinearHead
        from pucl.models.encoders import ProjectionHead

        super().__init__()
        self.model = model
        self.predictor = ProjectionHead(proj_dim, hidden, proj_dim)
        self.classifier = LinearHead(model.encoder.out_dim)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """-> (predictor output q, paper-ordered probabilities f = [P(pos), P(neg)])."""
        h = self.model.encoder(x)
        q = self.predictor(self.model.head(h))
        f = torch.softmax(self.classifier(h), dim=1).flip(1)
        return q, f


def _soft_ce(f: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    return -(s * torch.log(f.clamp_min(1e-8))).sum(dim=1)


def ncpu_step_loss(f: torch.Tensor, targets: torch.Tensor, labeled: torch.Tensor,
                   pair_loss: torch.Tensor, w_r: float, w_ent: float) -> torch.Tensor:
    """Eq. 14 for one batch plus the entropy regulariser: mean CE over P + mean CE over U
    + w_r NoiSNCL + w_ent sum_c fbar_c log fbar_c (fbar: the batch's mean prediction;
    minimising it keeps the classifier from giving every sample one class)."""
    ce = _soft_ce(f, targets)
    loss = w_r * pair_loss
    if labeled.any():
        loss = loss + ce[labeled].mean()
    if (~labeled).any():
        loss = loss + ce[~labeled].mean()
    mean_f = f.mean(dim=0).clamp_min(1e-8)
    return loss + w_ent * (mean_f * mean_f.log()).sum()


@torch.no_grad()
def momentum_update(target: torch.nn.Module, online: torch.nn.Module, ema: float) -> None:
    """BYOL's target network: an exponential moving average of the online weights
    (rate `ema`); its buffers (BatchNorm statistics) copied."""
    for t_param, o_param in zip(target.parameters(), online.parameters(), strict=True):
        t_param.mul_(ema).add_(o_param.detach(), alpha=1 - ema)
    for t_buf, o_buf in zip(target.buffers(), online.buffers(), strict=True):
        t_buf.copy_(o_buf)


def _frozen_copy(module: nn.Module, device: torch.device) -> nn.Module:
    """The momentum target: a copy on `device` that no optimiser step touches."""
    target = copy.deepcopy(module).to(device)
    for param in target.parameters():
        param.requires_grad_(False)
    return target


def _initial_state(labeled: torch.Tensor, proj_dim: int, generator: torch.Generator) -> dict:
    """Algorithm 1's running state on the host: random unit prototypes, and targets s (eq.
    11) and s' starting at positive for the labelled rows, negative for the rest."""
    targets = torch.where(labeled.view(-1, 1), torch.tensor([1.0, 0.0]),
                          torch.tensor([0.0, 1.0]))
    prototypes = torch.randn(2, proj_dim, generator=generator, device=generator.device)
    return {"prototypes": F.normalize(prototypes.cpu(), dim=1), "targets": targets,
            "s_prime": targets.clone()}


def _checkpoint(network: NcPUNetwork, target: nn.Module, run: dict,
                sat: SelfAdaptiveThreshold, labeled: torch.Tensor) -> dict:
    """What an epoch's checkpoint holds: both networks, the running targets and
    prototypes, the threshold's levels, and U's positive share under the targets."""
    unlabeled = run["targets"][~labeled, 0]
    return {"model": network.state_dict(), "target": target.state_dict(), **run,
            "sat": [sat.global_level, list(sat.class_level)],
            "positive_fraction_u": float(unlabeled.mean()) if len(unlabeled)
            else float("nan")}


def _restore(saved: dict, network: NcPUNetwork, target: nn.Module, run: dict,
             sat: SelfAdaptiveThreshold) -> None:
    network.load_state_dict(saved["model"])
    target.load_state_dict(saved["target"])
    run.update({key: saved[key] for key in ("prototypes", "targets", "s_prime")})
    sat.global_level, sat.class_level = saved["sat"][0], list(saved["sat"][1])


def train_ncpu(
    network: NcPUNetwork,
    images: torch.Tensor,
    is_labeled: torch.Tensor,
    augment,
    settings: NcPUSettings,
    generator: torch.Generator,
    device: torch.device,
    resume: dict | None = None,
    on_epoch=None,
    progress: bool = True,
) -> list[EpochStats]:
    """NcPU on uint8 images [n, ...] with labelled positives `is_labeled` [n], in the shared
    epoch loop (`train_contrastive`'s checkpoint contract). Images live on the device; the
    prototype and target updates (Algorithm 1) stay on the host: each step reads back."""
    batch = full_batch_size(len(images), settings.batch_size)
    images, labeled_on_device = on_device(device, generator, images, is_labeled.bool())
    network.to(device)
    target = _frozen_copy(network.model, device)  # encoder + projector, no predictor
    loop = TrainingLoop(network.parameters(), settings.epochs, settings.lr,
                        settings.weight_decay, modules=(network, target), desc="ncpu")
    labeled_all = is_labeled.bool()
    run = _initial_state(labeled_all, network.predictor.net[-1].out_features, generator)
    sat = SelfAdaptiveThreshold(settings.gamma)

    def step(epoch: int, idx: torch.Tensor) -> float:
        warm = epoch < settings.warmup_epochs
        v1, v2 = two_views(images, idx, augment, generator)
        labeled = labeled_on_device[idx]
        idx = idx.cpu()  # the running targets are kept on the host
        q, f = (out.float() for out in network(torch.cat([v1, v2])))
        q1, q2, f1 = q[:batch], q[batch:], f[:batch]
        with torch.no_grad():
            k = target(torch.cat([v1, v2])).float()
            k1, k2 = k[:batch], k[batch:]
        # classifier's labels, paper order (0 = positive); labelled rows are positive
        guess = torch.where(labeled, 0, f1.detach().argmax(dim=1))
        run["prototypes"] = update_prototypes(run["prototypes"], q1.cpu(), guess.cpu(),
                                              settings.alpha)
        tau = sat.update(f1.cpu())
        if not warm:
            s, new_prime = phantom_targets(run["s_prime"][idx], q1.cpu(), run["prototypes"],
                                           f1[:, 1].detach().cpu(), tau, settings.beta,
                                           labeled.cpu())
            run["s_prime"][idx], run["targets"][idx] = new_prime, s
        same = torch.eye(batch, dtype=torch.bool, device=device) if warm else \
            guess.view(-1, 1) == guess.view(1, -1)
        pair = 0.5 * (noisncl_loss(q1, k2, same) + noisncl_loss(q2, k1, same))
        loss = loop.backward_step(ncpu_step_loss(
            f1, run["targets"][idx].to(device), labeled, pair, settings.w_r, settings.w_ent))
        momentum_update(target, network.model, settings.ema)
        return loss

    return loop.run(len(images), batch, generator, step,
                    lambda: _checkpoint(network, target, run, sat, labeled_all),
                    lambda saved: _restore(saved, network, target, run, sat), resume=resume,
                    on_epoch=on_epoch, progress=progress,
                    postfix=lambda stats: {"loss": f"{stats.loss:.4f}",
                                           "tau": f"{sat.tau:.3f}"})


class NcPUParams(EntryParams):
    """pretrain.ncpu: paper 001's appendix F momenta and weights; its 1,300 epochs and 30
    warm-up epochs do not fit a CPU, so the warm-up is ours to set."""

    alpha: float = Field(0.99, ge=0.0, lt=1.0, description="prototype momentum (eq. 9)")
    beta: float = Field(0.99, ge=0.0, lt=1.0, description="pseudo-target momentum (eq. 10)")
    gamma: float = Field(0.99, ge=0.0, lt=1.0, description="threshold momentum (eq. 12)")
    ema: float = Field(0.99, ge=0.0, lt=1.0, description="target network momentum")
    w_r: float = Field(50.0, ge=0.0, description="NoiSNCL weight (eq. 14)")
    w_ent: float = Field(5.0, ge=0.0, description="entropy regulariser weight")
    warmup_epochs: int = Field(5, ge=0, description="epochs with fixed pseudo-targets")


@PRETRAINING_METHODS.register("ncpu", params=NcPUParams)
class NcPU(PretrainingMethod):
    """NcPU (paper 001): encoder and classifier trained together, no class prior needed."""

    def __init__(self, alpha: float = 0.99, beta: float = 0.99, gamma: float = 0.99,
                 ema: float = 0.99, w_r: float = 50.0, w_ent: float = 5.0,
                 warmup_epochs: int = 5):
        self.options = {"alpha": alpha, "beta": beta, "gamma": gamma, "ema": ema,
                        "w_r": w_r, "w_ent": w_ent, "warmup_epochs": warmup_epochs}

    def train(self, job: PretrainJob) -> PretrainResult:
        network = NcPUNetwork(job.model, job.proj_dim, job.proj_hidden)
        settings = NcPUSettings(job.epochs, job.batch_size, job.lr, job.weight_decay,
                                **self.options)
        history = train_ncpu(network, job.images, job.is_labeled, job.augment, settings,
                             job.generator, job.device, resume=job.resume,
                             on_epoch=job.on_epoch, progress=job.progress)
        return PretrainResult(history, describe(network.classifier))
