"""Pretraining resumed from a mid-run checkpoint equals an uninterrupted run."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pucl.data.augment import AffineJitter
from pucl.losses import make_loss
from pucl.models import ContrastiveModel
from pucl.pretraining import PretrainSettings, train_contrastive
from pucl.runtime import seeded_generator


class Crash(Exception):
    pass


def fresh(seed=0):
    torch.manual_seed(seed)
    return ContrastiveModel("lenet5", (1, 28, 28), 32, 16)


def test_resume_is_bit_identical():
    rng = np.random.default_rng(0)
    images = torch.from_numpy(rng.integers(0, 255, (64, 1, 28, 28), dtype=np.uint8))
    labeled = torch.from_numpy(rng.random(64) < 0.3)
    settings = PretrainSettings(epochs=3, batch_size=32, lr=1e-3, weight_decay=0.0)
    cpu = torch.device("cpu")

    reference = fresh()
    history = train_contrastive(reference, make_loss("pucl"), images, labeled, AffineJitter(),
                                settings, seeded_generator(1), cpu, progress=False)

    saved = {}

    def crash_after_first(stats, state):
        saved.update(state)
        if stats.epoch == 1:
            raise Crash

    interrupted = fresh()
    with pytest.raises(Crash):
        train_contrastive(interrupted, make_loss("pucl"), images, labeled, AffineJitter(),
                          settings, seeded_generator(1), cpu, on_epoch=crash_after_first,
                          progress=False)
    assert saved["epoch"] == 1

    resumed = fresh(seed=123)  # different init: everything must come from the checkpoint
    resumed_history = train_contrastive(resumed, make_loss("pucl"), images, labeled,
                                        AffineJitter(), settings, seeded_generator(99), cpu,
                                        resume=saved, progress=False)
    assert [h.loss for h in resumed_history] == [h.loss for h in history]
    for a, b in zip(reference.state_dict().values(), resumed.state_dict().values(),
                    strict=True):
        assert torch.equal(a, b)
