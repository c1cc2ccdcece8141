"""Ways to smooth a finished run's scores, compared on its saved classifier (no retraining).

    python benchmarks/smoothing_variants.py "data/runs/fmnist-ii/variant=...,n_p=1000,s0" [...]

For each run directory of a `pucl bench` / `pucl run` (its params.yaml, split, encoder and
head.pt), prints the test accuracy of the head alone and of neighbour smoothing
(`classifier.neighbours`, pucl.classify.neighbours) with k = 10 and 20:

- `plain`: the bank of training rows, as train_classifier builds it;
- `hflip`: that, averaged with the mirror image's smoothed score (evaluate.tta: hflip);
- `mirror_bank`: the bank also holds the mirrored training rows (and the mirror views);
- `two_hops`: the bank's scores are first smoothed over their own k nearest bank rows.

`plain` and `hflip` with the run's own k reproduce evaluate's metrics, which checks the
rest. reports/fmnist/README.md has what it measured.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from pucl.artifacts.models import load_classifier, load_models
from pucl.classify.neighbours import NeighbourHead
from pucl.data import load_dataset
from pucl.models.features import embed, scoring_views
from pucl.params.config import load_params


def two_hop_scores(bank: np.ndarray, scores: np.ndarray, k: int) -> np.ndarray:
    """Each bank row's score averaged with its k nearest other bank rows' (cosine)."""
    unit = torch.nn.functional.normalize(torch.from_numpy(bank), dim=1)
    out = np.empty_like(scores)
    for start in range(0, len(unit), 2048):
        similarity = unit[start:start + 2048] @ unit.T
        rows = torch.arange(start, min(start + 2048, len(unit)))
        similarity[rows - start, rows] = -2.0  # not itself
        nearest = similarity.topk(k, dim=1).indices.numpy()
        out[start:start + len(rows)] = (scores[start:start + len(rows)]
                                        + scores[nearest].sum(axis=1)) / (k + 1)
    return out


def compare(run: Path, root: Path) -> dict[str, float]:
    params = load_params(run / "params.yaml")
    data = load_dataset(params.data.dataset, root=str(root / params.paths.data_root),
                        test_fraction=params.data.test_fraction, seed=params.data.seed)
    manifest = pd.read_parquet(run / "data/split/manifest.parquet")
    # the bank of a PU objective: the labelled positives and U (pucl.classify.objectives)
    rows = np.sort(manifest.query("split == 'train' and (in_u or pu == 1)")["index"].to_numpy())
    test = manifest[manifest["split"] == "test"]
    head_path = run / "data/classifier/head.pt"
    model, head = load_classifier(head_path, load_models(run / "data/pretrain/model.pt"))[0]
    base = head.base if isinstance(head, NeighbourHead) else head
    which = json.loads((run / "data/classifier/summary.json").read_text())["features"]
    banks = [embed(model, view, which) for view in scoring_views(data.x_train[rows], True)]
    tests = [embed(model, view, which)
             for view in scoring_views(data.x_test[test["index"].to_numpy()], True)]
    truth = test["y"].to_numpy()

    def accuracy(scores: np.ndarray) -> float:
        return float(((scores >= 0.5) == truth).mean())

    def smoothed(bank, k, bank_scores=None):
        smoother = NeighbourHead(base, torch.from_numpy(bank), k,
                                 None if bank_scores is None else torch.from_numpy(bank_scores))
        return [smoother.positive_score(view) for view in tests]

    own = [base.positive_score(view) for view in tests]
    result = {"head": accuracy(own[0]), "head_hflip": accuracy((own[0] + own[1]) / 2)}
    for k in (10, 20):
        plain = smoothed(banks[0], k)
        mirrored = smoothed(np.concatenate(banks), k)
        hops = smoothed(banks[0], k, two_hop_scores(banks[0], base.positive_score(banks[0]),
                                                    k).astype(np.float32))
        result |= {f"k{k}_plain": accuracy(plain[0]),
                   f"k{k}_hflip": accuracy((plain[0] + plain[1]) / 2),
                   f"k{k}_mirror_bank": accuracy((mirrored[0] + mirrored[1]) / 2),
                   f"k{k}_two_hops": accuracy(hops[0])}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--root", type=Path, default=Path("."), help="the project root")
    args = parser.parse_args()
    torch.set_num_threads(1)
    for run in args.runs:
        print(run.name, json.dumps({k: round(v, 4) for k, v in compare(run, args.root).items()}),
              flush=True)


if __name__ == "__main__":
    main()
