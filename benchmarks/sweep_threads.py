"""Two sweep points side by side, each with its share of the cores (`base.threads` = 1
on a 2-core machine, as `pucl sweep --workers 2` sets it): their prior and PUPL steps
with only torch held to that share (pucl before `runtime.device.limit_threads`) against
every BLAS and OpenMP pool held to it (pucl now), measured in one run.

Each point is its own process, as the sweep's process pool runs them: KM2 on
`--n` + `--n` embedded MNIST digits (PCA 50, the `estimate_prior` stage's preparation;
LAPACK and BLAS through numpy and scipy) and PU k-means on `--rows` x 64 features (numpy
BLAS and faiss's OpenMP search). Both pairs run the same inputs with the same seeds; the
estimates must agree.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/sweep_threads.py     # about 3 minutes
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

MODES = ("torch only", "every pool")


def point(mode: str, n: int, rows: int, seed: int) -> dict:
    """One point's prior and PUPL steps, its threads held as `mode` says."""
    import numpy as np
    import torch

    from pucl.runtime.device import limit_threads

    if mode == "every pool":
        limit_threads(1)
    else:
        torch.set_num_threads(1)
    from km2_speed import mnist_inputs  # run as a file: benchmarks/ is on sys.path

    from pucl.prior import estimate_prior
    from pucl.pupl.algorithms import pu_kmeans

    start = time.perf_counter()
    mix, comp, _ = mnist_inputs(n, seed)
    prior = estimate_prior(mix, comp, [0.3162, 0.5623, 1.0, 1.7783, 3.1623]).km2
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(rows, 64)).astype(np.float32)
    z[: rows // 3] += 1.5  # the positive third
    labeled = np.zeros(rows, dtype=bool)
    labeled[: rows // 10] = True
    labels = pu_kmeans(z, labeled, restarts=5, max_iter=50, rng=rng)
    return {"prior": round(float(prior), 6), "positives": int(labels.labels.sum()),
            "seconds": time.perf_counter() - start}


def pair(mode: str, args: argparse.Namespace) -> dict:
    """Both points at once; wall seconds of the pair, CPU seconds of both."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, __file__, "--point", mode, "--n", str(args.n),
                               "--rows", str(args.rows), "--seed", str(seed)],
                              stdout=subprocess.PIPE, text=True) for seed in (0, 1)]
    outs = [json.loads(p.communicate()[0]) for p in procs]
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall": wall, "cpu": cpu, "points": outs}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=700, help="KM2 points a side")
    parser.add_argument("--rows", type=int, default=200_000, help="PU k-means rows")
    parser.add_argument("--rounds", type=int, default=2, help="pairs per mode, alternating")
    parser.add_argument("--point", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.point:
        print(json.dumps(point(args.point, args.n, args.rows, args.seed)))
        return 0
    print(f"{os.cpu_count()} cores; 2 points at once, base.threads 1 each; KM2 on "
          f"{args.n} + {args.n} points, PU k-means on {args.rows:,} x 64", flush=True)
    results: dict[str, list[dict]] = {mode: [] for mode in MODES}
    for _ in range(args.rounds):
        for mode in MODES:
            results[mode].append(got := pair(mode, args))
            seconds = ", ".join(f"{p['seconds']:.1f}" for p in got["points"])
            print(f"  {mode:10s}: pair {got['wall']:6.1f} s wall, {got['cpu']:6.1f} s CPU "
                  f"(points {seconds} s)", flush=True)
    same = {json.dumps([{k: v for k, v in p.items() if k != "seconds"} for p in r["points"]])
            for rows in results.values() for r in rows}
    mean = {mode: {k: sum(r[k] for r in rows) / len(rows) for k in ("wall", "cpu")}
            for mode, rows in results.items()}
    old, new = mean["torch only"], mean["every pool"]
    print(f"every pool / torch only: wall {new['wall'] / old['wall']:.2f} "
          f"({new['wall']:.1f} vs {old['wall']:.1f} s), CPU {new['cpu'] / old['cpu']:.2f} "
          f"({new['cpu']:.1f} vs {old['cpu']:.1f} s); the same estimates in every run: "
          f"{'yes' if len(same) == 1 else 'NO'}")
    return 0 if len(same) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
