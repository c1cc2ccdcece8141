"""Pretraining input pipeline: images/s of real pretraining epochs (uint8 images in memory,
batched augmentations, forward/backward/step) divided by images/s of the bare
forward/backward/step on pre-made tensors of the same batch, measured side by side in one
run. Target: ratio >= 0.7 for LeNet-5 on 28x28 images.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/input_pipeline.py [--threads 2] [--epochs 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from pucl.data import load_dataset
from pucl.data.augment import AffineJitter, normalize, to_unit_float
from pucl.losses import make_loss
from pucl.models import ContrastiveModel
from pucl.pretraining.contrastive import PretrainSettings, train_contrastive
from pucl.runtime.device import seeded_generator

TARGET = 0.7


def _model() -> ContrastiveModel:
    torch.manual_seed(0)
    return ContrastiveModel("lenet5", (1, 28, 28), 256, 128)


def full_pipeline(images: torch.Tensor, labeled: torch.Tensor, batch: int, epochs: int
                  ) -> list[float]:
    """Images per second of each pretraining epoch after the first (warm-up)."""
    history = train_contrastive(
        _model(), make_loss("pucl", temperature=0.5), images, labeled, AffineJitter(),
        PretrainSettings(epochs + 1, batch, 2e-3, 1e-5), seeded_generator(0),
        torch.device("cpu"), progress=False)
    steps = len(images) // batch
    return [steps * batch / h.seconds for h in history[1:]]


def bare_steps(images: torch.Tensor, labeled: torch.Tensor, batch: int, epochs: int
               ) -> list[float]:
    """The same model, loss and optimizer on one pre-made, pre-normalised batch: the
    limit the input pipeline is measured against."""
    model = _model().train()
    loss_fn = make_loss("pucl", temperature=0.5)
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3, weight_decay=1e-5)
    x = normalize(to_unit_float(images[:batch]))
    views = torch.cat([x, x.flip(-1)])  # two different pre-made views
    mask = labeled[:batch]
    steps = len(images) // batch
    rates = []
    for epoch in range(epochs + 1):
        start = time.perf_counter()
        for _ in range(steps):
            z = model(views)
            loss = loss_fn(z[:batch], z[batch:], mask)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            float(loss.detach())
        if epoch:  # the first is warm-up
            rates.append(steps * batch / (time.perf_counter() - start))
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--epochs", type=int, default=3, help="timed epochs (after 1 warm-up)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    data = load_dataset("mnist5k", root=None, test_fraction=0.2, seed=0)
    images = torch.from_numpy(data.x_train)
    labeled = torch.from_numpy(np.random.default_rng(0).random(len(images)) < 0.25)
    # Interleave the two measurements so that a busy machine slows both alike.
    full, bare = [], []
    for _ in range(2):
        bare += bare_steps(images, labeled, args.batch, args.epochs)
        full += full_pipeline(images, labeled, args.batch, args.epochs)
    f, b = statistics.median(full), statistics.median(bare)
    print(f"LeNet-5, 28x28, batch {args.batch}, {args.threads} threads, "
          f"{len(images)} images per epoch, median of {len(full)} epochs each")
    print(f"  full pipeline (augment + forward/backward/step): {f:9.0f} images/s")
    print(f"  bare forward/backward/step on pre-made tensors:  {b:9.0f} images/s")
    ratio = f / b
    print(f"  ratio {ratio:.2f}  (target >= {TARGET}: {'met' if ratio >= TARGET else 'NOT met'})")


if __name__ == "__main__":
    main()
