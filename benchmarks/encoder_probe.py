"""Which pretraining levers move the encoder's kNN probe on Fashion-MNIST (issue: features
that beat pixels). A short PUCL pretraining on every training image with one lever
changed, then the kNN probe (k = 20, cosine, true binary labels) on the encoder's output
and on LeNet-5's convolutional trunk, beside the raw pixels' probe.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/encoder_probe.py --name crop_t0.2 \\
        --temperature 0.2 --scale 1.0 1.6 --translate 0.15 [--epochs 10] [--task fmnist-ii]
    OMP_WAIT_POLICY=PASSIVE python benchmarks/encoder_probe.py --pixels

Each call appends one row to reports/encoder/probe.csv (its settings, both probes,
pretraining minutes). The labelled positives are 1,000 drawn uniformly from the task's
training positives with numpy's generator seeded by --seed. `--width C1 C2` widens
LeNet-5's two convolutions (lenet5 has 6 and 16; 16 32 is the encoder lenet5_wide).
Needs Fashion-MNIST's IDX files (Debian's dataset-fashion-mnist, or --data-root).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from _commit import TEXT_COLUMNS, with_commit  # run as files: benchmarks/ is on sys.path

from pucl.data import get_task, load_dataset
from pucl.data.augment import AffineJitter
from pucl.evaluation.metrics import knn_accuracy
from pucl.losses import make_loss
from pucl.models import ContrastiveModel, ProjectionHead
from pucl.models.encoders import LeNet5
from pucl.models.features import embed, input_features
from pucl.pretraining.contrastive import PretrainSettings, train_contrastive

OUT = Path(__file__).resolve().parents[1] / "reports" / "encoder" / "probe.csv"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--name", default="default")
    ap.add_argument("--task", default="fmnist-ii", choices=["fmnist-i", "fmnist-ii"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=512)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--loss", default="pucl")
    ap.add_argument("--temperature", type=float, default=0.5)
    ap.add_argument("--degrees", type=float, default=10.0)
    ap.add_argument("--translate", type=float, default=0.1)
    ap.add_argument("--scale", type=float, nargs=2, default=(0.9, 1.1),
                    help="zoom range of the affine jitter (1.0 1.6: crops of the centre)")
    ap.add_argument("--jitter", type=float, default=0.2, help="brightness and contrast")
    ap.add_argument("--hflip", type=float, default=0.5)
    ap.add_argument("--width", type=int, nargs=2, default=None, metavar=("C1", "C2"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--data-root", default=None)
    ap.add_argument("--pixels", action="store_true", help="only the raw pixels' probe")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    data = load_dataset("fmnist", root=a.data_root)
    task = get_task(a.task)
    y_train, y_test = task.binarize(data.y_train), task.binarize(data.y_test)
    row = {"name": a.name, "task": a.task, "seed": a.seed}
    if a.pixels:
        row["knn_inputs"] = knn_accuracy(input_features(data.x_train), y_train,
                                         input_features(data.x_test), y_test, 20)
    else:
        rng = np.random.default_rng(a.seed)
        labeled = np.zeros(len(y_train), dtype=bool)
        labeled[rng.choice(np.flatnonzero(y_train == 1), 1000, replace=False)] = True
        torch.manual_seed(a.seed)
        model = ContrastiveModel("lenet5", tuple(data.image_shape), 256, 128)
        if a.width:  # same initialisation order as a registered encoder's
            torch.manual_seed(a.seed)
            model.encoder = LeNet5(tuple(data.image_shape), channels=tuple(a.width))
            model.head = ProjectionHead(model.encoder.out_dim, 256, 128)
        augment = AffineJitter(a.degrees, a.translate, a.scale[0], a.scale[1], a.jitter,
                               a.jitter, a.hflip)
        start = time.perf_counter()
        history = train_contrastive(
            model, make_loss(a.loss, temperature=a.temperature, nonneg="none"),
            torch.from_numpy(data.x_train), torch.from_numpy(labeled), augment,
            PretrainSettings(a.epochs, a.batch_size, a.lr, 1e-5),
            torch.Generator().manual_seed(a.seed), torch.device("cpu"))
        row.update({k: v for k, v in vars(a).items() if k not in ("name", "task", "seed",
                                                                  "pixels", "data_root")})
        row.update(scale=" ".join(map(str, a.scale)),
                   width=" ".join(map(str, a.width or (6, 16))),
                   pretrain_minutes=(time.perf_counter() - start) / 60,
                   final_loss=history[-1].loss)
        for which in ("encoder", "trunk"):
            row[f"knn_{which}"] = knn_accuracy(embed(model, data.x_train, which), y_train,
                                               embed(model, data.x_test, which), y_test, 20)
    print(row)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    frame = with_commit(pd.DataFrame([row]))
    if OUT.exists():
        frame = pd.concat([pd.read_csv(OUT, dtype=TEXT_COLUMNS), frame], ignore_index=True)
    frame.to_csv(OUT, index=False)


if __name__ == "__main__":
    main()
