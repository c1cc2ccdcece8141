"""Run every benchmark in sequence: `python -m benchmarks [--only NAME ...] [--quick]`.

Each script runs in its own process with OMP_WAIT_POLICY=PASSIVE (idle OpenMP threads
yield the core instead of spinning against the other process). --quick shrinks the
inputs for a smoke run; its numbers are not the reported ones.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SUITE = {  # name: (script, arguments of the reported run, arguments of a quick run)
    "loss_speed": ("loss_speed.py", [], ["--repeats", "3"]),
    "input_pipeline": ("input_pipeline.py", [], ["--epochs", "1"]),
    "pretrain_throughput": ("pretrain_throughput.py", [],
                            ["--steps", "2", "--rounds", "1", "--no-write"]),
    "km2_speed": ("km2_speed.py", [], ["--n", "400"]),
    "pupl_scale": ("pupl_scale.py", [], ["--sizes", "20000x64"]),
    "pipeline_timing": ("pipeline_timing.py", [],
                        ["--set", "pretrain.epochs=1", "--set", "classifier.epochs=2"]),
    "device_timing": ("device_timing.py", ["--out", "reports/benchmarks/device_timing.csv"],
                      ["--set", "pretrain.epochs=1", "--set", "classifier.epochs=2"]),
    "head_placement": ("head_placement.py", [], ["--epochs", "1", "--n-u", "5000"]),
    "knn_probe": ("knn_probe.py", [], ["--train", "3000", "--test", "500", "--dims", "84"]),
    "parallel_fits": ("parallel_fits.py", [], ["--rows", "2000", "--epochs", "1", "--rounds", "1",
                                              "--pretrain-epochs", "1"]),
    "sweep_threads": ("sweep_threads.py", [], ["--n", "300", "--rows", "20000", "--rounds", "1"]),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=sorted(SUITE), default=list(SUITE))
    parser.add_argument("--quick", action="store_true", help="small inputs (smoke run)")
    args = parser.parse_args()
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    failed = []
    for name in args.only:
        script, full, quick = SUITE[name]
        print(f"\n=== {name} ===", flush=True)
        start = time.perf_counter()
        code = subprocess.call([sys.executable, str(HERE / script),
                                *(quick if args.quick else full)], env=env,
                               cwd=HERE.parent)
        print(f"--- {name}: {time.perf_counter() - start:.0f} s"
              f"{'' if code == 0 else f', FAILED (exit {code})'}", flush=True)
        if code:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
