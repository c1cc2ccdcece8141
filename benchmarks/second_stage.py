"""A probe of a second stage trained afresh (not product code): a new LeNet-5 learns from
the first stage's surest pseudo-labels of U, with a FixMatch-like consistency term
against an EMA teacher (HolisticPU / FixMatch / P3Mix-E family). It is compared with the
first stage (the preset's classifier) on the label-free validation estimate, which is
what would choose between them, and on the test accuracy, which is only reported.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/second_stage.py --preset fmnist-i --seed 0
        [--share 0.7] [--consistency 1.0] [--epochs 20] [--work data/runs/second-stage-...]

The first stage is the preset's default variant run through the stages into --work
(kept, so that several second stages reuse it; tracking off). The second stage reads the
first stage's scores of U (its served model, test-time views and all), labels the top
`share` x pi-hat of U positive and the bottom `share` x (1 - pi-hat) negative, adds the
labelled positives, and trains on them under the pretraining's augmentation; every step
also takes a batch of U, weakly viewed for the teacher, strongly for the student, and
learns the teacher's labels where it is at least `threshold` sure. Appends a row to
reports/fmnist/second_stage.csv.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("PUCL_TRACKING", "off")  # before pucl reads it

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # _commit, run as a file
from _commit import TEXT_COLUMNS, with_commit  # noqa: E402

OUT = ROOT / "reports" / "fmnist" / "second_stage.csv"


def first_stage(preset: str, seed: int, work: Path):
    """The preset's default variant through the stages into `work` (once): its params,
    metrics and prior estimate."""
    from pucl.params.presets import load_preset
    from pucl.params.sweeps import variant_overrides
    from pucl.stages.runner import resolve_params, run_pipeline

    overrides = variant_overrides(load_preset(preset), None)[1]
    params = resolve_params(ROOT, {**overrides, "base.seed": seed,
                                   "paths.pretrain_cache": None})
    if not (work / "data/evaluate/metrics.json").exists():
        run_pipeline(params, work, f"second-stage-s{seed}", progress=True)
    metrics = json.loads((work / "data/evaluate/metrics.json").read_text())
    prior = float(json.loads((work / "data/prior/prior.json").read_text())["prior"])
    return params, metrics, prior


def scores(model: nn.Module, x: np.ndarray) -> np.ndarray:
    """P(y = 1 | x) of uint8 images, in batches."""
    from pucl.data.augment import to_unit_float

    model.eval()
    with torch.no_grad():
        return np.concatenate([model(to_unit_float(torch.as_tensor(x[i:i + 2048]))).numpy()
                               for i in range(0, len(x), 2048)])


def pseudo_labelled(work: Path, params, data, train: pd.DataFrame, prior: float,
                    share: float):
    """(images, labels) the student learns from, U's images, and how right the labels are."""
    from pucl.artifacts.models import load_classifier, load_models
    from pucl.classify.deployable import ServedClassifier

    model, head = load_classifier(work / "data/classifier/head.pt",
                                  load_models(work / "data/pretrain/model.pt"))[0]
    served = ServedClassifier(model.encoder, head, mirror=params.evaluate.tta == "hflip",
                              shift=params.evaluate.tta_shift)
    in_u = train["in_u"].to_numpy()
    x_u = data.x_train[train.loc[in_u, "index"].to_numpy()]
    order = np.argsort(-scores(served, x_u), kind="stable")
    n_pos, n_neg = int(share * prior * len(x_u)), int(share * (1 - prior) * len(x_u))
    pos, neg = order[:n_pos], order[::-1][:n_neg]
    labelled = data.x_train[train.loc[train["pu"] == 1, "index"].to_numpy()]
    x = np.concatenate([labelled, x_u[pos], x_u[neg]])
    y = np.r_[np.ones(len(labelled) + n_pos), np.zeros(n_neg)].astype(np.int64)
    y_u = train.loc[in_u, "y"].to_numpy()
    right = {"pseudo_pos_right": float((y_u[pos] == 1).mean()),
             "pseudo_neg_right": float((y_u[neg] == 0).mean())}
    return x, y, x_u, right


def train_student(x: np.ndarray, y: np.ndarray, x_u: np.ndarray, params, args,
                  work: Path) -> tuple[nn.Module, float]:
    """A fresh LeNet-5 and head (`--start pucl`: the LeNet-5 starts from the first stage's
    contrastive encoder, before its fine-tuning), FixMatch-like against an EMA teacher;
    returns the teacher and the share of U's batches it was sure of in the last epoch."""
    from pucl.data.augment import make_augment, normalize, to_unit_float
    from pucl.models.encoders import make_encoder

    gen = torch.Generator().manual_seed(args.seed)
    torch.manual_seed(args.seed)
    encoder = make_encoder("lenet5", (1, *x.shape[-2:]))
    if args.start == "pucl":
        from pucl.artifacts.models import load_model

        encoder.load_state_dict(load_model(work / "data/pretrain/model.pt").encoder.state_dict())
    student = nn.Sequential(encoder, nn.Linear(encoder.out_dim, 2))
    teacher = copy.deepcopy(student).requires_grad_(False)
    strong, mirror = make_augment(params.pretrain.augment, tabular=False), \
        params.pretrain.augment.hflip > 0
    x_l, y_l, x_u = torch.as_tensor(x), torch.as_tensor(y), torch.as_tensor(x_u)
    batch, steps = 256, len(x) // 256
    opt = torch.optim.Adam(student.parameters(), lr=2e-3, weight_decay=1e-5)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(opt, args.epochs * steps)

    def view(rows: torch.Tensor, augment) -> torch.Tensor:
        images = to_unit_float(rows)
        if augment is not None:
            return normalize(augment.apply(images, augment.draw(images.shape, gen)))
        if mirror:  # the weak view: a mirror at most
            flip = torch.rand(len(images), generator=gen) < 0.5
            images = torch.where(flip[:, None, None, None], images.flip(-1), images)
        return normalize(images)

    for _ in range(args.epochs):
        student.train()
        order, sure = torch.randperm(len(x_l), generator=gen), 0.0
        for step in range(steps):
            rows = order[step * batch:(step + 1) * batch]
            u_rows = torch.randint(0, len(x_u), (batch,), generator=gen)
            with torch.no_grad():
                confidence, label = torch.softmax(teacher(view(x_u[u_rows], None)), 1).max(1)
            mask = (confidence >= args.threshold).float()
            logits = student(torch.cat([view(x_l[rows], strong), view(x_u[u_rows], strong)]))
            loss = F.cross_entropy(logits[:batch], y_l[rows]) + args.consistency * (
                F.cross_entropy(logits[batch:], label, reduction="none") * mask).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            schedule.step()
            with torch.no_grad():  # the teacher follows the student's weights
                for t, s in zip(teacher.parameters(), student.parameters(), strict=True):
                    t.mul_(args.ema).add_(s, alpha=1 - args.ema)
                for t, s in zip(teacher.buffers(), student.buffers(), strict=True):
                    t.copy_(s)
            sure += float(mask.mean()) / steps
    return teacher, sure


def measured(net: nn.Module, params, data, prior: float, val: pd.DataFrame,
             test: pd.DataFrame, seed: int) -> dict:
    """Test accuracy, and the validation estimate beside its truth."""
    from pucl.classify.deployable import ServedClassifier
    from pucl.evaluation.label_free import validation_metrics

    encoder, head = net  # scored as the served classifier is: over its test-time views
    served = ServedClassifier(encoder, head, mirror=params.evaluate.tta == "hflip",
                              shift=params.evaluate.tta_shift)
    on_test = scores(served, data.x_test[test["index"].to_numpy()])
    on_val = scores(served, data.x_train[val["index"].to_numpy()])
    in_u = val["in_u"].to_numpy()
    estimate = validation_metrics(on_val[val["pu"].to_numpy() == 1], on_val[in_u], prior,
                                  params.evaluate.prior_error, val["y"].to_numpy()[in_u], seed)
    return {"accuracy": float(((on_test >= 0.5) == test["y"].to_numpy()).mean()),
            "val_est_accuracy": estimate["val_est_accuracy"],
            "val_true_accuracy": estimate["val_true_accuracy"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="fmnist-i")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--share", type=float, default=0.7, help="of U's expected classes")
    parser.add_argument("--consistency", type=float, default=1.0, help="its weight; 0: off")
    parser.add_argument("--threshold", type=float, default=0.95)
    parser.add_argument("--ema", type=float, default=0.99)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--start", choices=("fresh", "pucl"), default="fresh",
                        help="the student's LeNet-5: new, or the contrastive encoder")
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    work = args.work or ROOT / "data" / "runs" / f"second-stage-{args.preset}-s{args.seed}"
    start = time.perf_counter()
    params, first, prior = first_stage(args.preset, args.seed, work)
    torch.set_num_threads(params.base.threads)
    from pucl.params.dataset import dataset_of

    data = dataset_of(params, ROOT)
    manifest = pd.read_parquet(work / "data/split/manifest.parquet")
    train, val, test = (manifest[manifest["split"] == part].reset_index(drop=True)
                        for part in ("train", "val", "test"))
    x, y, x_u, right = pseudo_labelled(work, params, data, train, prior, args.share)
    stage_two = time.perf_counter()
    teacher, sure = train_student(x, y, x_u, params, args, work)
    row = {"preset": args.preset, "seed": args.seed, "share": args.share,
           "consistency": args.consistency, "threshold": args.threshold, "ema": args.ema,
           "epochs": args.epochs, "start": args.start, "prior": prior, **right,
           "teacher_sure": sure,
           "first_accuracy": first["accuracy"], "first_val_est": first["val_est_accuracy"],
           "first_val_true": first["val_true_accuracy"],
           **{f"second_{k}": v for k, v in
              measured(teacher, params, data, prior, val, test, args.seed).items()},
           "second_minutes": (time.perf_counter() - stage_two) / 60,
           "minutes": (time.perf_counter() - start) / 60}
    print(json.dumps(row))
    table = with_commit(pd.DataFrame([row]))
    if OUT.exists():  # one row per probe: earlier ones stay
        table = pd.concat([pd.read_csv(OUT, dtype=TEXT_COLUMNS), table], ignore_index=True)
    table.to_csv(OUT, index=False, float_format="%.4f")


if __name__ == "__main__":
    main()
