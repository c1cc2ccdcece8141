"""Independent fits one after the other on every thread (`base.fit_workers` 1) against
side by side, each in its own process on its share (`base.fit_workers` 2), measured in
one run on the same inputs: the cross-fitting folds' heads, then two encoders'
pretraining (`pretrain.members` 2, pucl.stages._pretrain_members).

What F-MNIST's presets fit in their classifier step, scaled down: LeNet-5 heads with
Dist-PU's objective and NcPU's pair loss, fine-tuned end to end, one per fold, on
`--rows` images of the embedded MNIST-5k digits (tiled) with a fifth of the positives
labelled, the true prior given. The encoder is a fresh LeNet-5 (timing does not need a
pretrained one), so the heads are weak; the two settings differ in the threads each fit
computes on, so their scores differ too (tests/test_parallel_fits.py checks that a fit
computes the same bits in a worker as here on as many threads). The encoders are PUCL
pretrainings of `--pretrain-epochs` on the same images, with seeds 0 and 1.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/parallel_fits.py     # about 7 minutes
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from pucl.classify.objectives import TrainingRows
from pucl.data.catalog import load_dataset
from pucl.data.split import crossfit_folds
from pucl.data.tasks import get_task
from pucl.models import ContrastiveModel
from pucl.recipe import Recipe
from pucl.recipe.by_input import for_inputs
from pucl.recipe.crossfit import fit_folds
from pucl.runtime.device import limit_threads
from pucl.stages._pretrain_members import side_by_side, train_into


def inputs(rows: int, seed: int) -> tuple[np.ndarray, TrainingRows, np.ndarray, np.ndarray]:
    data = load_dataset("mnist5k", test_fraction=0.2, seed=0)
    y = get_task("mnist-i").binarize(data.y_train)
    repeats = -(-rows // len(y))
    x, y = np.tile(data.x_train, (repeats, 1, 1, 1))[:rows], np.tile(y, repeats)[:rows]
    rng = np.random.default_rng(seed)
    labelled = (y == 1) & (rng.random(rows) < 0.2)
    fold = crossfit_folds(labelled, np.ones(rows, bool), 2, seed)
    return x, TrainingRows(np.arange(rows), labelled, np.ones(rows, bool)), fold, y


def pretrain_two(x: np.ndarray, labelled: np.ndarray, epochs: int, workers: int,
                 threads: int) -> float:
    """Seconds to pretrain the encoders of seeds 0 and 1 (PUCL on `x`), one after the
    other here (workers 1) or side by side in worker processes, into a scratch folder."""
    recipe = for_inputs(Recipe.from_settings({"pretrain.encoder": "lenet5",
                                              "pretrain.epochs": epochs}, seed=0),
                        x.shape[1:], len(x))
    images, is_labeled = torch.from_numpy(x), torch.from_numpy(labelled)
    cpu = torch.device("cpu")
    with tempfile.TemporaryDirectory() as scratch:
        out, start = Path(scratch), time.perf_counter()
        todo = [(k, k, f"benchmark-{k}") for k in (0, 1)]
        if workers == 1:
            for k, seed, fp in todo:
                (out / str(k)).mkdir()
                train_into(out / str(k), recipe, images, is_labeled, None, seed, fp, cpu)
        else:
            side_by_side(out, recipe, images, is_labeled, None, todo, cpu, workers, threads)
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--epochs", type=int, default=10, help="fine-tuning epochs a fold")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2, help="each setting this many times")
    parser.add_argument("--pretrain-epochs", type=int, default=10,
                        help="pretraining epochs of each encoder (0: skip the encoders)")
    args = parser.parse_args()
    limit_threads(args.threads)
    x, rows, fold, y = inputs(args.rows, 0)
    recipe = for_inputs(Recipe.from_settings({
        "pretrain.encoder": "lenet5", "classifier.objective": "dist_pu_pairs",
        "classifier.epochs": 20, "classifier.finetune_epochs": args.epochs,
        "classifier.finetune_lr": 0.001, "evaluate.tta_shift": 0}, seed=0),
        x.shape[1:], len(x))
    torch.manual_seed(0)
    model = ContrastiveModel("lenet5", x.shape[1:], 128, 64)
    seconds: dict[int, list[float]] = {1: [], 2: []}
    scores = {}
    for _ in range(args.rounds):  # interleaved, so a slow minute of the machine hits both
        for workers in (1, 2):
            start = time.perf_counter()
            scores[workers] = fit_folds(recipe, [model], x, rows, fold, float(y.mean()),
                                        torch.device("cpu"), workers=workers,
                                        threads=args.threads).scores
            seconds[workers].append(time.perf_counter() - start)
    one, two = min(seconds[1]), min(seconds[2])
    print(f"two folds of {args.rows // 2} rows, {args.epochs} fine-tuning epochs each, "
          f"{args.threads} threads:")
    print(f"  one after the other (fit_workers 1): {one:6.1f} s  (runs {seconds[1]})")
    print(f"  side by side (fit_workers 2):        {two:6.1f} s  (runs {seconds[2]})")
    print(f"  side by side / one after the other:  {two / one:.2f}")
    truth = y == 1
    for workers in (1, 2):
        print(f"  fit_workers {workers}: out-of-fold accuracy against the digits' labels "
              f"{float(((scores[workers] >= 0.5) == truth).mean()):.4f}, positive share "
              f"{float((scores[workers] >= 0.5).mean()):.3f}")
    if args.pretrain_epochs:
        pretrained: dict[int, list[float]] = {1: [], 2: []}
        for _ in range(args.rounds):
            for workers in (1, 2):
                pretrained[workers].append(pretrain_two(x, rows.labelled, args.pretrain_epochs,
                                                        workers, args.threads))
        one, two = min(pretrained[1]), min(pretrained[2])
        print(f"two encoders pretrained {args.pretrain_epochs} epochs on {args.rows} rows:")
        print(f"  one after the other (fit_workers 1): {one:6.1f} s  (runs {pretrained[1]})")
        print(f"  side by side (fit_workers 2):        {two:6.1f} s  (runs {pretrained[2]})")
        print(f"  side by side / one after the other:  {two / one:.2f}")


if __name__ == "__main__":
    main()
