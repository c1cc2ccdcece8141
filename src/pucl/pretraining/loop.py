"""The epoch loop every pretraining method shares (pure: no files, no tracking).

Each epoch draws one permutation from the caller's generator, cuts it into full batches
(BatchNorm wants them; the last partial batch is dropped), runs the method's step on
each, and steps Adam's cosine schedule. After every epoch `on_epoch(stats, state)` gets
the whole training state; passing that state back as `resume` continues bit for bit,
because the generator (sampling and augmentation) is part of it.

The generator lives on the training device and so do the images (`on_device`): batch
order, augmentations and steps are queued there without a host round trip, and the
epoch's losses are summed there and read back once per epoch.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass

import torch

from pucl.data.augment import augmented_views, view_draws
from pucl.runtime import work
from pucl.runtime.device import LossSum, adam, current_lr, descend, epoch_order, load_optimizer
from pucl.runtime.progress import EpochBar


@dataclass(frozen=True)
class EpochStats:
    epoch: int
    loss: float
    lr: float
    # clock times: nan for epochs restored from a checkpoint, which keeps none (a file
    # other stages depend on must not change when the same training is run again)
    seconds: float = float("nan")
    images_per_s: float = float("nan")  # augmented views through forward + backward per s
    gmac: float = float("nan")  # the epoch's work (pucl.runtime.work), kept with its times

    def to_dict(self) -> dict:
        return asdict(self)

    def outcome(self) -> dict:
        """What the epoch computed, without its clock times."""
        return {"epoch": self.epoch, "loss": self.loss, "lr": self.lr}


class SlowRunWarning(UserWarning):
    """A training loop that will run for long on this device: said after its first epoch."""


SLOW_MINUTES = 10.0  # a loop projected to run longer than this is announced


def warn_if_slow(desc: str, first: EpochStats, epochs_left: int) -> None:
    """Say, after the first epoch, when the epochs left would take over SLOW_MINUTES at
    its pace, with the projection and what makes it faster."""
    minutes = first.seconds * epochs_left / 60
    if minutes > SLOW_MINUTES:
        warnings.warn(SlowRunWarning(
            f"{desc}: the first epoch took {first.seconds:.0f} s ({first.images_per_s:.0f} "
            f"images/s), so the {epochs_left} epochs left will take about {minutes:.0f} "
            "minutes on this device; fewer epochs, a smaller encoder (pretrain.encoder: "
            "lenet5 for small greyscale images, mlp for feature rows) or a GPU is faster"),
            stacklevel=2)


def full_batch_size(n: int, batch_size: int) -> int:
    batch = min(batch_size, n)
    if batch < 2:
        raise ValueError(f"need at least 2 training images, got {n}")
    return batch


def two_views(images: torch.Tensor, idx: torch.Tensor, augment, generator: torch.Generator
              ) -> tuple[torch.Tensor, torch.Tensor]:
    """Two independently augmented, normalised views of images[idx], on the images'
    device (which is the generator's)."""
    draws = view_draws(augment, images, len(idx), generator, views=2)
    v1, v2 = augmented_views(images, idx, augment, draws)
    return v1, v2


class TrainingLoop:
    """What varies between methods is passed in; the loop owns optimiser, schedule,
    shuffling, statistics, progress and the checkpoint contract.

    step(epoch, idx) -> the batch loss (a tensor, not read back), already back-propagated
      through `optimizer`, or None for a batch the method skips;
    state() -> the method's own state for a checkpoint (models, running targets, ...);
    load_state(resume) restores it; postfix(stats) -> extra fields for the progress bar.
    """

    def __init__(self, params: Iterable[torch.nn.Parameter], epochs: int, lr: float,
                 weight_decay: float, modules: tuple[torch.nn.Module, ...],
                 desc: str = "pretrain"):
        self.epochs = epochs
        self.modules = modules  # put in train mode at every epoch
        self.desc = desc
        self.optimizer = adam(params, lr, weight_decay)
        self.schedule = torch.optim.lr_scheduler.CosineAnnealingLR(self.optimizer,
                                                                   T_max=epochs)

    def backward_step(self, loss: torch.Tensor) -> torch.Tensor:
        descend(self.optimizer, loss)
        return loss.detach()

    def run(self, n: int, batch: int, generator: torch.Generator,
            step: Callable[[int, torch.Tensor], torch.Tensor | None],
            state: Callable[[], dict], load_state: Callable[[dict], None],
            resume: dict | None = None,
            on_epoch: Callable[[EpochStats, dict], None] | None = None,
            postfix: Callable[[EpochStats], dict] | None = None,
            progress: bool = True) -> list[EpochStats]:
        history: list[EpochStats] = []
        start_epoch = 0
        if resume is not None:
            load_state(resume)
            load_optimizer(self.optimizer, resume["optimizer"])
            self.schedule.load_state_dict(resume["schedule"])
            generator.set_state(resume["generator"])
            history = [EpochStats(**h) for h in resume["history"]]
            start_epoch = resume["epoch"]
        steps = n // batch
        bar = EpochBar(self.epochs, self.desc, disable=not progress, initial=start_epoch)
        for epoch in bar:
            for module in self.modules:
                module.train()
            t0 = time.perf_counter()
            with work.counting() as tally:
                order = epoch_order(n, generator)
                losses = LossSum()
                for i in range(steps):
                    losses.add(step(epoch, order[i * batch:(i + 1) * batch]))
            lr = current_lr(self.optimizer)
            self.schedule.step()
            loss = losses.mean()  # the epoch's one read from the device: its work is done
            seconds = time.perf_counter() - t0
            stats = EpochStats(epoch + 1, loss, lr, seconds, 2 * steps * batch / seconds,
                               tally.gmac)
            history.append(stats)
            if epoch == start_epoch:
                warn_if_slow(self.desc, stats, self.epochs - epoch - 1)
            bar.set_postfix(postfix(stats) if postfix else
                            {"loss": f"{stats.loss:.4f}", "img_s": f"{stats.images_per_s:.0f}"})
            if on_epoch is not None:
                on_epoch(stats, {
                    **state(), "epoch": epoch + 1,
                    "optimizer": self.optimizer.state_dict(),
                    "schedule": self.schedule.state_dict(),
                    "generator": generator.get_state(),
                    "history": [h.outcome() for h in history],
                })
        return history
