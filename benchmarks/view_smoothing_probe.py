"""Test-time views against neighbour smoothing, on a finished run (no retraining; a probe,
not product code).

    python benchmarks/view_smoothing_probe.py data/runs/NAME [...] \
        [--out reports/fmnist/view_smoothing.csv]

A run of `pucl run` with `classifier.neighbours` > 0 (its heads keep their bank) and a
validation part (`split.val_fraction` > 0). Each way of scoring below is read on the
label-free validation estimate (what would choose between them), the validation rows'
hidden truth and the test accuracy (reported only), every member's scores averaged:

- `view` / `views18`: the head alone on the image / averaged over mirror x 3 x 3 positions
  2 pixels apart (evaluate.tta hflip, tta_shift 2);
- `views18_rot` / `views18_scale`: those 18 and the image and its mirror rotated by
  +-8 degrees / scaled by 0.92 and 1.08 (4 views more);
- `smooth_view`: what train_classifier ships with neighbours (the image's own score and
  its k nearest bank rows' scores); `smooth_each_view18`: the same on each of the 18
  views, averaged (what evaluate.tta does to a smoothed head);
- `smooth_views18_own`: the 18 views' mean own score with the image's k neighbours;
- `smooth_views18_bank`: that, with every bank row's score itself averaged over its 18
  views.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from pucl.artifacts.models import classifier_features, load_classifier, load_models
from pucl.classify.neighbours import nearest_rows
from pucl.evaluation.label_free import validation_metrics
from pucl.models.features import embed, scoring_views
from pucl.params.config import load_params
from pucl.params.dataset import dataset_of
from pucl.recipe.prior import error_allowed, half_width

sys.path.insert(0, str(Path(__file__).resolve().parent))  # _commit, run as a file
from _commit import TEXT_COLUMNS, with_commit  # noqa: E402


def warped(x: np.ndarray, degrees: float = 0.0, scale: float = 1.0) -> np.ndarray:
    """uint8 images [n, c, h, w] rotated and scaled about their centre (bilinear)."""
    t = torch.from_numpy(x).float()
    a = math.radians(degrees)
    theta = torch.tensor([[math.cos(a), -math.sin(a), 0.0],
                          [math.sin(a), math.cos(a), 0.0]]) / scale
    grid = F.affine_grid(theta.expand(len(t), 2, 3), list(t.shape), align_corners=False)
    out = F.grid_sample(t, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    return out.round().clamp(0, 255).to(torch.uint8).numpy()


def member_scores(model, head, reads: str, x: np.ndarray, bank_views: torch.Tensor
                  ) -> dict[str, torch.Tensor]:
    def own(images: np.ndarray) -> torch.Tensor:
        with torch.no_grad():
            return torch.softmax(head.base(torch.from_numpy(embed(model, images, reads))), 1)[:, 1]

    views = list(scoring_views(x, True, 2))  # the image first; its mirror at 9
    owns = torch.stack([own(v) for v in views])
    extra = {kind: torch.stack([own(warped(b, **{kind: value}))
                                for b in (x, views[9]) for value in values])
             for kind, values in (("degrees", (-8, 8)), ("scale", (0.92, 1.08)))}
    k = head.k

    def neighbours_of(images: np.ndarray) -> torch.Tensor:
        return nearest_rows(F.normalize(torch.from_numpy(embed(model, images, reads)), dim=1),
                            head.bank, k)

    near = neighbours_of(x)
    each = torch.stack([(owns[i] + head.bank_scores[neighbours_of(v)].sum(1)) / (k + 1)
                        for i, v in enumerate(views)])
    return {"view": owns[0], "views18": owns.mean(0),
            "views18_rot": torch.cat([owns, extra["degrees"]]).mean(0),
            "views18_scale": torch.cat([owns, extra["scale"]]).mean(0),
            "smooth_view": (owns[0] + head.bank_scores[near].sum(1)) / (k + 1),
            "smooth_each_view18": each.mean(0),
            "smooth_views18_own": (owns.mean(0) + head.bank_scores[near].sum(1)) / (k + 1),
            "smooth_views18_bank": (owns.mean(0) + bank_views[near].sum(1)) / (k + 1)}


def probe(run: Path, root: Path) -> pd.DataFrame:
    params = load_params(run / "params.yaml")
    data = dataset_of(params, root)
    manifest = pd.read_parquet(run / params.paths.split / "manifest.parquet")
    part = {s: manifest[manifest["split"] == s] for s in ("train", "val", "test")}
    head_path = run / params.paths.classifier / "head.pt"
    members = load_classifier(head_path, load_models(run / params.paths.pretrain / "model.pt"))
    reads = classifier_features(head_path)
    prior = json.loads((run / params.paths.prior / "prior.json").read_text())
    x_train = data.x_train[part["train"]["index"].to_numpy()]  # the bank's rows, in order
    scores: dict[str, dict[str, list]] = {"val": {}, "test": {}}
    for model, head in members:
        bank_views = torch.stack([torch.softmax(head.base(torch.from_numpy(
            embed(model, v, reads))), 1)[:, 1].detach() for v in scoring_views(x_train, True, 2)]
        ).mean(0)
        for name, x in (("val", data.x_train), ("test", data.x_test)):
            got = member_scores(model, head, reads, x[part[name]["index"].to_numpy()], bank_views)
            for key, value in got.items():
                scores[name].setdefault(key, []).append(value.numpy())
    val, in_u = part["val"], part["val"]["in_u"].to_numpy()
    rows = []
    for key in scores["test"]:
        v, t = (np.mean(scores[name][key], axis=0) for name in ("val", "test"))
        m = validation_metrics(v[val["pu"].to_numpy() == 1], v[in_u], float(prior["prior"]),
                               error_allowed(params.evaluate.prior_error, half_width(prior)),
                               val["y"].to_numpy()[in_u], params.base.seed)
        rows.append({"run": run.name, "task": params.data.task, "seed": params.base.seed,
                     "scoring": key, "val_est_accuracy": m["val_est_accuracy"],
                     "val_true_accuracy": m["val_true_accuracy"],
                     "accuracy": float(((t >= 0.5) == (part["test"]["y"].to_numpy() == 1)).mean())})
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--root", type=Path, default=Path("."), help="the project root")
    parser.add_argument("--out", type=Path, help="append the rows to this CSV")
    args = parser.parse_args()
    for run in args.runs:
        table = probe(run, args.root.resolve())
        print(table.round(4).to_string(index=False), flush=True)
        if args.out is not None:
            table = with_commit(table)
            old = pd.read_csv(args.out, dtype=TEXT_COLUMNS) if args.out.exists() else None
            pd.concat([old, table] if old is not None else [table]).to_csv(args.out, index=False)


if __name__ == "__main__":
    main()
