"""SSC self-training with class prototypes (paper 003, Algorithm 3.1) for PU data.

Per batch: the labelled positives (one view), two augmented views of each unlabeled
sample, and K = 2 trainable prototypes (negative, positive) go through one weighted
SupCon (eq. 7-9). An unlabeled sample takes the class of the prototype softmax of its
un-augmented ("weak") view when that is more confident than `threshold` (eq. 5-6), and a
label of its own otherwise, so that its two views are each other's only positive (as in
SimCLR). PU gives no labelled negative: the negative prototype learns only from confident
pseudo-negatives and from being pushed away from the positives.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from tqdm.auto import tqdm

from pucl.data.augment import normalize, to_unit_float
from pucl.losses.ssc import prototype_probabilities, unlabeled_targets, weighted_supcon
from pucl.pretraining import EpochStats

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


def ssc_batch(model, prototypes: torch.Tensor, x_labeled, u_view1, u_view2, u_weak,
              settings: SSCSettings) -> tuple[torch.Tensor, float]:
    """The SSC loss of one batch and the confident share of its unlabeled samples."""
    with torch.no_grad():
        probs = prototype_probabilities(model(u_weak), prototypes, settings.proto_temperature)
    y_u, confident = unlabeled_targets(probs, settings.threshold)
    z = model(torch.cat([x_labeled, u_view1, u_view2])) if len(x_labeled) else \
        model(torch.cat([u_view1, u_view2]))
    z = torch.cat([z, prototypes])
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
    """Train `model` (encoder + projector) and `prototypes` [2, proj_dim] in place; same
    checkpoint contract as `train_contrastive`."""
    n = len(images)
    batch = min(settings.batch_size, n)
    if batch < 2:
        raise ValueError(f"need at least 2 training images, got {n}")
    model.to(device)
    prototypes.data = prototypes.data.to(device)
    params = [*model.parameters(), prototypes]
    optimizer = torch.optim.Adam(params, lr=settings.lr, weight_decay=settings.weight_decay)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=settings.epochs)
    history: list[EpochStats] = []
    start_epoch = 0
    if resume is not None:
        model.load_state_dict(resume["model"])
        prototypes.data.copy_(resume["prototypes"])
        optimizer.load_state_dict(resume["optimizer"])
        schedule.load_state_dict(resume["schedule"])
        generator.set_state(resume["generator"])
        history = [EpochStats(**h) for h in resume["history"]]
        start_epoch = resume["epoch"]
    labeled_all = is_labeled.bool()
    steps = n // batch
    bar = tqdm(range(start_epoch, settings.epochs), desc="ssc", unit="epoch",
               disable=not progress, initial=start_epoch, total=settings.epochs)
    for epoch in bar:
        model.train()
        t0 = time.perf_counter()
        order = torch.randperm(n, generator=generator)
        total, confident_share = 0.0, 0.0
        for step in range(steps):
            idx = order[step * batch:(step + 1) * batch]
            x = to_unit_float(images[idx])
            lab = labeled_all[idx]
            x_l, x_u = x[lab], x[~lab]
            if len(x_u) < 2:
                continue
            views_l = normalize(augment(x_l, generator)) if len(x_l) else x_l
            loss, share = ssc_batch(
                model, prototypes, views_l.to(device),
                normalize(augment(x_u, generator)).to(device),
                normalize(augment(x_u, generator)).to(device), normalize(x_u).to(device),
                settings)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            total += float(loss.detach())
            confident_share += share
        lr = optimizer.param_groups[0]["lr"]
        schedule.step()
        seconds = time.perf_counter() - t0
        stats = EpochStats(epoch + 1, total / max(steps, 1), lr, seconds,
                           2 * steps * batch / seconds)
        history.append(stats)
        bar.set_postfix(loss=f"{stats.loss:.4f}", confident=f"{confident_share / steps:.2f}")
        if on_epoch is not None:
            on_epoch(stats, {
                "epoch": epoch + 1, "model": model.state_dict(),
                "prototypes": prototypes.detach().cpu().clone(),
                "optimizer": optimizer.state_dict(), "schedule": schedule.state_dict(),
                "generator": generator.get_state(),
                "history": [h.to_dict() for h in history],
            })
    return history
