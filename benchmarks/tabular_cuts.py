"""Where to cut a classifier's scores, read on the tabular benchmark's out-of-fold scores:
does a cut that needs no prior, or one that maximises the label-free accuracy estimate,
beat today's fixed cut at P(y = 1 | x) = 0.5?

    python benchmarks/tabular_cuts.py [--candidate NAME] [--tag f5-recipe]
        [--out reports/tabular/cuts.csv]

Reads the choose fits' kept scores (`runs_scores/TABLE__NAME__TAG__sSEED.csv.gz`: every
training row scored by a model that never saw it) and the hidden labels of the same rows
(`tabular.pu_rows`, the same seeded split), so no model is fitted. For each fit, the
accuracy on U's rows at each cut:

- half: today's cut, 0.5;
- share: U's top pi-hat share called positive (pi-hat: the prior the fit estimated);
- lee_liu: the cut that maximises TPR_P(t)^2 / r_U(t) (Lee & Liu 2003), which reads no
  prior: TPR on the labelled positives, r the share of U called positive;
- label_free: the cut that maximises the label-free accuracy on U, pi-hat TPR_P(t) +
  (1 - pi-hat)(1 - FPR(t)) with FPR's clip to [0, 1] (`pucl.evaluation.label_free.
  accuracy_on_u`, the estimate pucl reports, read at every cut);
- oracle: the best cut by the hidden labels (a ceiling, not a rule).

Out-of-fold scores are not the refit model's, so this measures the rules, not a shipped
model; a rule that wins here would still need the usual choose-and-report round.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a file
from _commit import TEXT_COLUMNS  # noqa: E402
from tabular import ROOT, pu_rows  # noqa: E402

from pucl.evaluation.label_free import accuracy_on_u  # noqa: E402

RULES = ("half", "share", "lee_liu", "label_free", "oracle")


def cut_accuracies(u_scores: np.ndarray, u_truth: np.ndarray, p_scores: np.ndarray,
                   prior: float) -> dict[str, float]:
    """Accuracy on U (hidden labels `u_truth`) of each rule's cut."""
    cuts = np.unique(np.concatenate([u_scores, p_scores]))
    # share of P and of U at or above each cut, by sorted search (no loop over cuts)
    tpr = 1 - np.searchsorted(np.sort(p_scores), cuts, side="left") / len(p_scores)
    rate = 1 - np.searchsorted(np.sort(u_scores), cuts, side="left") / len(u_scores)
    lee_liu = np.where(rate > 0, tpr ** 2 / np.maximum(rate, 1e-12), 0.0)
    label_free = accuracy_on_u(tpr, rate, prior)

    def accuracy(cut: float) -> float:
        return float(((u_scores >= cut) == (u_truth == 1)).mean())

    return {"half": accuracy(0.5),
            "share": accuracy(np.quantile(u_scores, 1 - prior)),
            "lee_liu": accuracy(cuts[np.argmax(lee_liu)]),
            "label_free": accuracy(cuts[np.argmax(label_free)]),
            "oracle": max(accuracy(c) for c in cuts)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidate", default="mask50+dist_pu_ft60+pt100+wd5e-3+sscl")
    parser.add_argument("--tag", default="f5-recipe", help="the scores files' folds tag")
    parser.add_argument("--runs", type=Path, default=ROOT / "reports" / "tabular" / "runs.csv")
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "tabular" / "cuts.csv")
    args = parser.parse_args(argv)
    runs = pd.read_csv(args.runs, dtype=TEXT_COLUMNS)
    folder = args.runs.with_name(args.runs.stem + "_scores")
    rows = []
    for path in sorted(folder.glob(f"*__{args.candidate}__{args.tag}__s*.csv.gz")):
        table, seed = path.name.split("__")[0], int(path.name.split("__s")[-1].split(".")[0])
        fit = runs[(runs.role == "choose") & runs.scores.astype(str).str.endswith(path.name)]
        prior = float(fit.prior.iloc[-1])
        scores = pd.read_csv(path)
        _, _, truth, _, _ = pu_rows(table, seed)
        u, p = scores[scores.in_u], scores[scores.pu == 1]
        rows.append({"table": table, "seed": seed, "prior": prior,
                     "prior_error": prior - truth.mean(),
                     **cut_accuracies(u.score.to_numpy(), truth[u["index"].to_numpy()],
                                      p.score.to_numpy(), prior)})
    frame = pd.DataFrame(rows).round(4)
    frame.to_csv(args.out, index=False)
    by_table = frame.groupby("table")[["prior_error", *RULES]].mean()
    print(by_table.round(4).to_string())
    print(frame[list(RULES)].mean().round(4).to_string())


if __name__ == "__main__":
    main()
