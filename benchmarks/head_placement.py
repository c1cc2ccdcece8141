"""Where the linear head should train: the same nnPU head on the same features, on the
CPU and on the device, side by side in one run (a decision docs/gpu.md records).

    python benchmarks/head_placement.py [--epochs 5] [--threads 8]

The shapes are F-MNIST-I's (1,000 labelled positives, 59,000 unlabeled rows, 84
features, batches of 256, params.yaml `classifier`); the features are random, which
changes nothing the clock sees. Each device trains once to warm up (kernels chosen,
steps recorded as CUDA graphs), then is timed; it prints seconds per epoch and the ratio.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("PUCL_TRACKING", "off")  # before pucl reads it

import numpy as np  # noqa: E402
import torch  # noqa: E402

from pucl.classify.linear import LinearSettings, train_pu_head  # noqa: E402
from pucl.runtime.device import seeded_generator  # noqa: E402


def seconds_per_epoch(device: str, positive, unlabeled, settings: LinearSettings) -> float:
    def train(epochs: int) -> None:
        run = LinearSettings(epochs, settings.lr, settings.weight_decay, settings.batch_size)
        train_pu_head(positive, unlabeled, 0.3, "nnpu", run, seeded_generator(0, device),
                      progress=False)

    train(1)  # warm-up
    start = time.perf_counter()
    train(settings.epochs)  # returns the head on the CPU: the device's work is done
    return (time.perf_counter() - start) / settings.epochs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=min(8, os.cpu_count() or 1))
    parser.add_argument("--n-p", type=int, default=1000)
    parser.add_argument("--n-u", type=int, default=59000)
    parser.add_argument("--dim", type=int, default=84)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    positive = rng.normal(size=(args.n_p, args.dim)).astype(np.float32)
    unlabeled = rng.normal(size=(args.n_u, args.dim)).astype(np.float32)
    settings = LinearSettings(args.epochs, 0.01, 1e-4, 256)
    devices = ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]
    times = {d: seconds_per_epoch(d, positive, unlabeled, settings) for d in devices}
    steps = -(-args.n_u // settings.batch_size)
    for device, seconds in times.items():
        print(f"{device:<5} {seconds:7.3f} s per epoch ({steps} steps: "
              f"{1000 * seconds / steps:.2f} ms a step; {args.threads} CPU threads)")
    if "cuda" in times:
        print(f"cpu / cuda: {times['cpu'] / times['cuda']:.2f} (above 1: the device is faster)")


if __name__ == "__main__":
    main()
