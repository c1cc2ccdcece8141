"""Which throughput levers buy pretraining epochs on 2 CPU cores (issue: features that beat
pixels). Images/s of the whole pretraining step (two augmented views, forward, PUCL loss,
backward, Adam step) for one lever changed at a time, measured side by side in one run
and printed as a ratio to the default (LeNet-5, batch 512, 2 threads, contiguous tensors,
eager mode). Rounds alternate between the levers so a busy machine slows all alike.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/pretrain_throughput.py [--steps 20] [--rounds 3]

Levers: channels_last memory format, torch.compile (its compile time reported apart),
batch 256 / 1024, 1 thread, the wider encoder lenet5_wide, the work counter every
stage runs under (pucl.runtime.work: its forward hook's cost), and bfloat16 autocast
(the model's forward in bf16, the loss in float32). Synthetic 28x28 uint8 images: the
step's cost does not depend on their content. One row per lever is written
to reports/encoder/throughput.csv, with the 60,000-image epoch time it implies.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd
import torch
from _commit import with_commit  # run as files: benchmarks/ is on sys.path

from pucl.data.augment import AffineJitter
from pucl.losses import make_loss
from pucl.models import ContrastiveModel
from pucl.pretraining.loop import two_views
from pucl.runtime import work
from pucl.runtime.device import seeded_generator

OUT = Path(__file__).resolve().parents[1] / "reports" / "encoder" / "throughput.csv"
EPOCH_IMAGES = 60_000  # Fashion-MNIST's training set


@dataclass(frozen=True)
class Lever:
    name: str
    encoder: str = "lenet5"
    batch: int = 512
    threads: int = 2
    channels_last: bool = False
    compile: bool = False
    counted: bool = False  # inside pucl.runtime.work.counting(), as in a pipeline stage
    bf16: bool = False  # the model's forward under bfloat16 autocast, the loss in float32


DEFAULT = Lever("default")
LEVERS = (DEFAULT, replace(DEFAULT, name="channels_last", channels_last=True),
          replace(DEFAULT, name="torch.compile", compile=True),
          replace(DEFAULT, name="batch 256", batch=256),
          replace(DEFAULT, name="batch 1024", batch=1024),
          replace(DEFAULT, name="1 thread", threads=1),
          replace(DEFAULT, name="lenet5_wide", encoder="lenet5_wide"),
          replace(DEFAULT, name="work counted", counted=True),
          replace(DEFAULT, name="bf16 autocast", bf16=True))


class Runner:
    """One lever's model, optimiser and data, stepped on demand."""

    def __init__(self, lever: Lever, images: torch.Tensor, labeled: torch.Tensor):
        self.lever = lever
        torch.manual_seed(0)
        model = ContrastiveModel(lever.encoder, (1, 28, 28), 256, 128).train()
        if lever.channels_last:
            model = model.to(memory_format=torch.channels_last)
        self.optimizer = torch.optim.Adam(model.parameters(), lr=2e-3, weight_decay=1e-5)
        self.model = torch.compile(model) if lever.compile else model
        self.loss_fn = make_loss("pucl", temperature=0.5)
        self.images, self.labeled = images, labeled
        self.augment = AffineJitter()
        self.generator = seeded_generator(0)

    def step(self) -> None:
        batch = self.lever.batch
        idx = torch.randint(0, len(self.images), (batch,), generator=self.generator)
        v1, v2 = two_views(self.images, idx, self.augment, self.generator)
        x = torch.cat([v1, v2])
        if self.lever.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.lever.bf16):
            z = self.model(x).float()
        loss = self.loss_fn(z[:batch], z[batch:], self.labeled[idx])
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        float(loss.detach())

    def rate(self, steps: int) -> float:
        torch.set_num_threads(self.lever.threads)
        with work.counting() if self.lever.counted else contextlib.nullcontext():
            start = time.perf_counter()
            for _ in range(steps):
                self.step()
            return steps * self.lever.batch / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="timed steps per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--out", type=Path, default=OUT, help=f"the CSV (default {OUT.name})")
    args = parser.parse_args()
    generator = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (8192, 1, 28, 28), dtype=torch.uint8, generator=generator)
    labeled = torch.rand(len(images), generator=generator) < 0.1

    runners, warmup = [], {}
    for lever in LEVERS:
        runner = Runner(lever, images, labeled)
        torch.set_num_threads(lever.threads)
        start = time.perf_counter()
        for _ in range(3):  # warm-up: allocator, oneDNN kernels, compilation
            runner.step()
        warmup[lever.name] = time.perf_counter() - start
        runners.append(runner)
    rates: dict[str, list[float]] = {lever.name: [] for lever in LEVERS}
    for _ in range(args.rounds):
        for runner in runners:
            rates[runner.lever.name].append(runner.rate(args.steps))
    torch.set_num_threads(DEFAULT.threads)

    base = statistics.median(rates[DEFAULT.name])
    rows = []
    for lever in LEVERS:
        rate = statistics.median(rates[lever.name])
        rows.append({"lever": lever.name, "encoder": lever.encoder, "batch": lever.batch,
                     "threads": lever.threads, "channels_last": lever.channels_last,
                     "compile": lever.compile, "counted": lever.counted, "bf16": lever.bf16,
                     "images_per_s": round(rate),
                     "ratio_to_default": round(rate / base, 3),
                     "epoch_s_60k": round(EPOCH_IMAGES / rate, 1),
                     "warmup_s": round(warmup[lever.name], 1)})
    table = pd.DataFrame(rows)
    print(f"pretraining step, 28x28, median of {args.rounds} rounds x {args.steps} steps")
    print(table.to_string(index=False))
    if not args.no_write:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with_commit(table).to_csv(args.out, index=False)
        print(f"written: {args.out}")


if __name__ == "__main__":
    main()
