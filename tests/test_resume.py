"""Pretraining resumed from a mid-run checkpoint equals an uninterrupted run."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pucl.data.augment import AffineJitter
from pucl.losses import make_loss
from pucl.models import ContrastiveModel
from pucl.pretraining.contrastive import PretrainSettings, train_contrastive
from pucl.runtime.device import seeded_generator


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


def test_sigkill_mid_epoch_then_rerun_reaches_the_uninterrupted_metrics(project):
    """Kill the pretrain stage process (SIGKILL) during epoch 3 of 4, rerun it: it resumes from
    the DVC-persisted checkpoint, and the pipeline ends with the metrics of a run that was
    never interrupted."""
    import os
    import signal
    import subprocess
    import sys
    import time

    import yaml

    from tests.helpers import stage

    params = yaml.safe_load((project / "params.yaml").read_text())
    params["pretrain"].update({"epochs": 4, "batch_size": 64})
    (project / "params.yaml").write_text(yaml.safe_dump(params))
    for name in ("build_split", "estimate_prior"):
        stage(project, name)
    checkpoint = project / "data/pretrain/checkpoint.pt"

    proc = subprocess.Popen([sys.executable, "-m", "pucl.stages", "pretrain"], cwd=project,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=os.environ.copy())
    deadline, epoch = time.monotonic() + 300, 0
    while time.monotonic() < deadline and proc.poll() is None:
        if checkpoint.exists():
            epoch = torch.load(checkpoint, weights_only=True)["epoch"]
            if epoch >= 2:
                proc.send_signal(signal.SIGKILL)
                break
        time.sleep(0.1)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "pretraining ended before it could be killed"
    assert 2 <= epoch < 4
    assert not (project / "data/pretrain/model.pt").exists()  # no partial output

    resumed = stage(project, "pretrain")
    assert f"resuming from {checkpoint} at epoch" in resumed.stderr
    for name in ("pupl_label", "train_classifier", "evaluate"):
        stage(project, name)
    interrupted_metrics = (project / "data/evaluate/metrics.json").read_bytes()
    history = (project / "data/pretrain/history.csv").read_bytes()
    models = {name: (project / "data" / name).read_bytes()
              for name in ("pretrain/model.pt", "classifier/head.pt")}

    checkpoint.unlink()
    for name in ("pretrain", "pupl_label", "train_classifier", "evaluate"):
        stage(project, name)
    assert (project / "data/evaluate/metrics.json").read_bytes() == interrupted_metrics
    # the same weights in the same bytes: DVC sees the resumed outputs as the clean ones
    assert {name: (project / "data" / name).read_bytes() for name in models} == models
    losses = [line.split(",")[1] for line in history.decode().splitlines()]
    clean = (project / "data/pretrain/history.csv").read_text().splitlines()
    assert losses == [line.split(",")[1] for line in clean]


def test_pretrain_fingerprint_covers_every_module_that_shapes_training():
    """A change to any of these must invalidate checkpoints and cached encoders: every
    file of the pretraining methods, the losses and the models, and the augmentations."""
    from pathlib import Path

    from pucl.artifacts.pretraining import training_code_files

    src = Path(__file__).resolve().parents[1] / "src" / "pucl"
    shaping = {src / "data" / "augment.py"}
    for package in ("pretraining", "losses", "models"):
        shaping |= set((src / package).glob("*.py"))
    assert len(shaping) > 10
    assert shaping <= {f.resolve() for f in training_code_files()}
