"""Contrastive pretraining loop (pure: no files, no tracking).

The caller owns persistence: `on_epoch` receives the full training state after every
epoch (to checkpoint it), and passing that state back as `resume` continues bit-for-bit
where it stopped, because the sampling/augmentation generator state is part of it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
from tqdm.auto import tqdm

from pucl.data.augment import AffineJitter, FeatureNoise, normalize, to_unit_float
from pucl.losses import ContrastiveLoss


@dataclass(frozen=True)
class PretrainSettings:
    epochs: int
    batch_size: int
    lr: float
    weight_decay: float


@dataclass(frozen=True)
class EpochStats:
    epoch: int
    loss: float
    lr: float
    seconds: float
    images_per_s: float  # augmented views through forward + backward per second

    def to_dict(self) -> dict:
        return asdict(self)


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
    """images: uint8 [n, c, h, w] or float features [n, d] (kept in memory);
    is_labeled: bool [n]."""
    n = images.shape[0]
    batch = min(settings.batch_size, n)
    if batch < 2:
        raise ValueError(f"need at least 2 training images, got {n}")
    model.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=settings.lr,
                                 weight_decay=settings.weight_decay)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=settings.epochs)
    history: list[EpochStats] = []
    start_epoch = 0
    if resume is not None:
        model.load_state_dict(resume["model"])
        optimizer.load_state_dict(resume["optimizer"])
        schedule.load_state_dict(resume["schedule"])
        generator.set_state(resume["generator"])
        history = [EpochStats(**h) for h in resume["history"]]
        start_epoch = resume["epoch"]

    steps = n // batch  # drop the last partial batch: BatchNorm wants full batches
    bar = tqdm(range(start_epoch, settings.epochs), desc="pretrain", unit="epoch",
               disable=not progress, initial=start_epoch, total=settings.epochs)
    for epoch in bar:
        model.train()
        t0 = time.perf_counter()
        order = torch.randperm(n, generator=generator)
        total = 0.0
        for step in range(steps):
            idx = order[step * batch:(step + 1) * batch]
            x = to_unit_float(images[idx])
            v1 = normalize(augment(x, generator)).to(device)
            v2 = normalize(augment(x, generator)).to(device)
            labeled = is_labeled[idx].to(device)
            z = model(torch.cat([v1, v2]))
            loss = loss_fn(z[:batch], z[batch:], labeled)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            total += float(loss.detach())
        lr = optimizer.param_groups[0]["lr"]
        schedule.step()
        seconds = time.perf_counter() - t0
        stats = EpochStats(epoch + 1, total / steps, lr, seconds, 2 * steps * batch / seconds)
        history.append(stats)
        bar.set_postfix(loss=f"{stats.loss:.4f}", img_s=f"{stats.images_per_s:.0f}")
        if on_epoch is not None:
            on_epoch(stats, {
                "epoch": epoch + 1,
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "schedule": schedule.state_dict(),
                "generator": generator.get_state(),
                "history": [h.to_dict() for h in history],
            })
    return history
