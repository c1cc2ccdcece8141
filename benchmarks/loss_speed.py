"""Forward + backward time of every contrastive objective at 2b = 1024 views, d = 128,
as a ratio to `sscl` measured in the same run (target: every ratio <= 1.5).

    OMP_WAIT_POLICY=PASSIVE python benchmarks/loss_speed.py [--repeats 20] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from pucl.losses import CONTRASTIVE_LOSSES, make_loss


def params_for(name: str) -> dict:
    if name.startswith("balanced"):
        return {"alpha": 2.0, "balance_lambda": 1.0}
    extra = {"pi": 0.5} if name in CONTRASTIVE_LOSSES.names(tag="needs_prior") else {}
    return {"temperature": 0.5, **({"mcl_lambda": 0.5} if name == "mcl" else {}), **extra}


def time_once(loss, z1, z2, labeled) -> float:
    a = z1.detach().clone().requires_grad_()
    b = z2.detach().clone().requires_grad_()
    start = time.perf_counter()
    loss(a, b, labeled).backward()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=512, help="b (views = 2b)")
    parser.add_argument("--dim", type=int, default=128)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(0)
    z1 = torch.randn(args.batch, args.dim, generator=gen)
    z2 = torch.randn(args.batch, args.dim, generator=gen)
    labeled = torch.rand(args.batch, generator=gen) < 0.25
    losses = {name: make_loss(name, **params_for(name)) for name in CONTRASTIVE_LOSSES}
    times: dict[str, list[float]] = {name: [] for name in losses}
    for loss in losses.values():  # warm-up
        time_once(loss, z1, z2, labeled)
    for _ in range(args.repeats):  # interleaved, so drifts in machine load hit all alike
        for name, loss in losses.items():
            times[name].append(time_once(loss, z1, z2, labeled))
    base = statistics.median(times["sscl"])
    print(f"2b = {2 * args.batch}, d = {args.dim}, threads = {args.threads}, "
          f"median of {args.repeats}")
    print(f"{'objective':<15}{'ms':>9}{'ratio to sscl':>16}")
    for name, values in times.items():
        med = statistics.median(values)
        print(f"{name:<15}{med * 1e3:>9.2f}{med / base:>16.2f}")


if __name__ == "__main__":
    main()
