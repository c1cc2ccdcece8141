"""The kNN probe (`pucl.evaluation.metrics.knn_accuracy`, evaluate's oracle diagnostic) against
scikit-learn's brute-force cosine KNeighborsClassifier, side by side on the same rows:
seconds of each, their ratio, and whether the two accuracies agree.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/knn_probe.py [--train 54000] [--test 10000]
        [--dims 84 256 784] [--device cpu]

The shapes are F-MNIST-I's evaluate: 54,000 training rows, 10,000 test rows, features of
the encoder (84), LeNet-5's trunk (256) and the inputs (784). The rows are random, in five
clusters, so the probe is neither always right nor always wrong.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from sklearn.neighbors import KNeighborsClassifier

from pucl.evaluation.metrics import knn_accuracy


def clustered(rng: np.random.Generator, n: int, dims: int) -> tuple[np.ndarray, np.ndarray]:
    labels = rng.integers(0, 5, size=n)
    rows = rng.normal(size=(n, dims)).astype(np.float32)
    rows[np.arange(n), labels] += 3.0  # each class leans along its own axis
    return rows, labels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=int, default=54000)
    parser.add_argument("--test", type=int, default=10000)
    parser.add_argument("--dims", type=int, nargs="+", default=[84, 256, 784])
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    device = torch.device(args.device)
    print(f"kNN probe, k {args.k}, {args.test:,} test rows against {args.train:,}, "
          f"{torch.get_num_threads()} torch threads, device {device}")
    print(f"{'features':>8} {'pucl s':>8} {'sklearn s':>10} {'sklearn / pucl':>15}  accuracies")
    rng = np.random.default_rng(0)
    for dims in args.dims:
        train, y_train = clustered(rng, args.train, dims)
        test, y_test = clustered(rng, args.test, dims)
        start = time.perf_counter()
        ours = knn_accuracy(train, y_train, test, y_test, args.k, device)
        ours_s = time.perf_counter() - start
        start = time.perf_counter()
        knn = KNeighborsClassifier(n_neighbors=args.k, metric="cosine").fit(train, y_train)
        reference = float((knn.predict(test) == y_test).mean())
        reference_s = time.perf_counter() - start
        same = "equal" if ours == reference else "DIFFER"
        print(f"{dims:>8} {ours_s:>8.2f} {reference_s:>10.2f} {reference_s / ours_s:>15.2f}  "
              f"{ours:.4f} / {reference:.4f} ({same})")


if __name__ == "__main__":
    main()
