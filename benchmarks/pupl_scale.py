"""PUPL at scale: seconds and peak memory of PU k-means (faiss) on 100,000 x 512 and
1,000,000 x 128 float32 features with 5 restarts, side by side with scikit-learn
KMeans(2, n_init=5) on the same data. Each measurement runs in its own process, so the
peak resident memory is that case's alone.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/pupl_scale.py [--sizes 100000x512,1000000x128]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np


def make_features(n: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two Gaussian clusters (40% positive) and 5% of the positives labelled."""
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.4
    centre = rng.normal(size=d).astype(np.float32)
    z = rng.standard_normal((n, d), dtype=np.float32)
    for start in range(0, n, 65_536):  # in place, so the peak memory is the method's
        block = z[start:start + 65_536]
        block[y[start:start + 65_536]] += centre
    labeled = y & (rng.random(n) < 0.05)
    return z, labeled, y


def run_case(method: str, n: int, d: int, restarts: int, threads: int) -> dict:
    import faiss

    faiss.omp_set_num_threads(threads)
    z, labeled, y = make_features(n, d)
    start = time.perf_counter()
    if method == "pucl":
        from pucl.pupl import pu_kmeans

        result = pu_kmeans(z, labeled, restarts, 100, np.random.default_rng(0))
        positive = result.labels.astype(bool)
    else:
        from sklearn.cluster import KMeans
        from threadpoolctl import threadpool_limits

        with threadpool_limits(threads):
            km = KMeans(2, n_init=restarts, max_iter=100, random_state=0).fit(z)
        # the cluster holding most labelled positives is the positive one
        pos_cluster = np.bincount(km.labels_[labeled], minlength=2).argmax()
        positive = km.labels_ == pos_cluster
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"method": method, "n": n, "d": d, "seconds": seconds,
            "peak_mb": peak / 1024, "data_mb": z.nbytes / 2**20,
            "positive_fraction": float(positive.mean()),
            "accuracy": float((positive == y).mean())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000x512,1000000x128")
    parser.add_argument("--restarts", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--case", help=argparse.SUPPRESS)  # internal: one measurement
    args = parser.parse_args()
    if args.case:
        method, n, d = args.case.split(":")
        print(json.dumps(run_case(method, int(n), int(d), args.restarts, args.threads)))
        return
    rows = []
    for size in args.sizes.split(","):
        n, d = (int(v) for v in size.split("x"))
        for method in ("pucl", "sklearn"):
            out = subprocess.run([sys.executable, __file__, "--case", f"{method}:{n}:{d}",
                                  "--restarts", str(args.restarts), "--threads",
                                  str(args.threads)], capture_output=True, text=True,
                                 check=True)
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
            r = rows[-1]
            print(f"{method:8s} {n:>9,d} x {d:<4d} {r['seconds']:8.1f} s  peak "
                  f"{r['peak_mb']:7.0f} MB (features {r['data_mb']:.0f} MB)  positive fraction "
                  f"{r['positive_fraction']:.3f}  accuracy {r['accuracy']:.4f}",
                  flush=True)
        pucl, sk = rows[-2], rows[-1]
        print(f"  {n:,d} x {d}: PUPL/faiss is {sk['seconds'] / pucl['seconds']:.1f}x the "
              f"speed of scikit-learn, peak memory ratio {pucl['peak_mb'] / sk['peak_mb']:.2f}")


if __name__ == "__main__":
    main()
