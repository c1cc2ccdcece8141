"""How a preset's head fares when its class prior is off: test accuracy against the
prior's error (issue: a head that does not need a prior that errs high).

    OMP_WAIT_POLICY=PASSIVE python benchmarks/prior_error_curve.py --preset fmnist-i
        [--variant default] [--seeds 0 1 2] [--offsets -0.05 0 0.05] [--set KEY=VALUE ...]
        [--out reports/fmnist/prior_curve.csv] [--cache DIR]

Each run is the preset's variant (its default unless --variant) with `classifier.prior`
set to the task's true prior plus an offset: the head trains with a prior that errs by
exactly that much. The runs of a seed share its pretrained encoders through --cache
(the contrastive pretraining here reads no prior), so a point costs its head.

Besides test accuracy and AUC, each row keeps two diagnostics read from the test ROC, to
tell a head that ranks worse from one whose cut is misplaced: `acc_best_cut` (the best
accuracy any threshold of these scores reaches, an upper bound no PU user can pick) and
`acc_share_cut` (the threshold at which the test rows' predicted positive share equals
the prior the head was given: a stand-in for a rule that matches U's share to pi-hat).
Both read test labels and so only explain a row; they never choose anything.

One CSV row per run, written as it ends; a rerun skips the rows already there. After
the runs (or alone, with --summary), `<out>_summary.csv` has one row per preset, variant
and offset (means over the seeds measured) and `<out>.png` the curves.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("PUCL_TRACKING", "off")  # before pucl reads it

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import yaml  # noqa: E402

from pucl.io import atomic_path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # _commit, run as a file
from _commit import TEXT_COLUMNS, current_commit  # noqa: E402
from _pipeline import ENCODER_CACHE, RunsBar, run_once  # noqa: E402

KEY = ["preset", "variant", "settings", "seed", "offset"]
# U is the whole balanced training set (case-control), so its prior is the positive share
# of the classes: 3 and 7 of 10 garments
TRUE_PRIOR_PRESETS = {"fmnist-i": 0.3, "fmnist-ii": 0.7}


def cut_diagnostics(roc: pd.DataFrame, prior_test: float, share: float) -> dict:
    """Accuracy at the best threshold of the test ROC, and at the threshold whose
    predicted positive share of the test rows is `share` (linear between ROC points)."""
    fpr, tpr = roc["fpr"].to_numpy(), roc["tpr"].to_numpy()
    accuracy = prior_test * tpr + (1 - prior_test) * (1 - fpr)
    predicted = prior_test * tpr + (1 - prior_test) * fpr  # rises along the curve
    return {"acc_best_cut": float(accuracy.max()),
            "acc_share_cut": float(np.interp(share, predicted, accuracy))}


def run_one(overrides: dict, seed: int, cache: Path, prior: float) -> dict:
    from pucl.reporting.tables import minutes_per_seed
    from pucl.stages.runner import rollup

    run = run_once({**overrides, "classifier.prior": prior}, seed, "prior-curve", cache,
                   keep=("evaluate", "roc.csv"))
    metrics = run.metrics
    keep = ("accuracy", "roc_auc", "val_est_accuracy", "val_true_accuracy",
            "prior_estimate", "prior_true")
    return {"prior_used": prior, **{k: metrics.get(k, float("nan")) for k in keep},
            **cut_diagnostics(run.kept, metrics["prior_true"], prior),
            "minutes": minutes_per_seed(run.minutes, rollup(run.stages))}


def read_rows(out: Path) -> pd.DataFrame:
    if not out.exists():
        return pd.DataFrame(columns=KEY)
    return pd.read_csv(out, keep_default_na=False, na_values=[""], dtype=TEXT_COLUMNS)


def summarise(rows: pd.DataFrame, out: Path) -> pd.DataFrame:
    """Per preset, variant, settings and offset: the mean of each measure over the seeds,
    with their number; written beside `out`, with the curves as a figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    measures = ["accuracy", "roc_auc", "acc_best_cut", "acc_share_cut", "val_est_accuracy",
                "val_true_accuracy"]
    table = (rows.groupby(["preset", "variant", "settings", "offset"], sort=True)
             .agg(n=("seed", "count"), accuracy_std=("accuracy", "std"),
                  **{m: (m, "mean") for m in measures}).reset_index())
    with atomic_path(out.with_name(f"{out.stem}_summary.csv")) as tmp:
        table.to_csv(tmp, index=False, float_format="%.4f")
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.8), sharey=False)
    for ax, measure, label in zip(axes, ("accuracy", "roc_auc"), ("test accuracy", "test AUC"),
                                  strict=True):
        for (preset, variant, settings), group in table.groupby(
                ["preset", "variant", "settings"]):
            seeds = int(group["n"].max())
            ax.errorbar(group["offset"], group[measure],
                        yerr=group["accuracy_std"] if measure == "accuracy" else None,
                        marker="o", capsize=3, label=f"{preset}: {variant}"
                        + ("" if settings == "default" else f" ({settings})")
                        + f", {seeds} seed{'s' if seeds > 1 else ''}")
        ax.axvline(0.0, color="grey", lw=0.8, ls=":")
        ax.set_xlabel("prior given to the head minus the true prior")
        ax.set_ylabel(label)
    # below both panels, so that no label hides a curve
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=1, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.02 + 0.035 * len(labels), 1, 1))
    from pucl.io import save_figure

    save_figure(out.with_suffix(".png"), fig)
    return table


def main() -> None:
    from pucl.params.presets import load_preset
    from pucl.params.sweeps import variant_overrides

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", required=True, choices=sorted(TRUE_PRIOR_PRESETS))
    parser.add_argument("--variant", default="default")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--offsets", type=float, nargs="+", default=[-0.05, 0.0, 0.05])
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="params overrides for every run (values parsed as YAML)")
    parser.add_argument("--out", type=Path,
                        default=ROOT / "reports" / "fmnist" / "prior_curve.csv")
    parser.add_argument("--cache", type=Path, default=ENCODER_CACHE,
                        help="pretrained encoders shared by fingerprint between runs and "
                             "sessions (default: data/cache/measurements)")
    parser.add_argument("--summary", action="store_true",
                        help="only rewrite the summary CSV and figure from --out's rows")
    args = parser.parse_args()
    if args.summary:
        print(summarise(read_rows(args.out), args.out).to_string(index=False))
        return
    spec = load_preset(args.preset)
    variant, overrides = variant_overrides(
        spec, spec.default if args.variant == "default" else args.variant)
    overrides = {**overrides, **{key: yaml.safe_load(value) for key, value in
                                 (item.split("=", 1) for item in args.set)}}
    settings, commit = " ".join(args.set) or "default", current_commit()
    truth = TRUE_PRIOR_PRESETS[args.preset]
    bar = RunsBar(len(args.seeds) * len(args.offsets), args.preset)
    for seed in args.seeds:  # seed by seed: the offsets of a seed share its encoders
        for offset in args.offsets:
            rows = read_rows(args.out)
            key = (args.preset, variant, settings, seed, round(offset, 4))
            if any(tuple(r) == key for r in rows[KEY].itertuples(index=False, name=None)):
                bar.skip()
                continue
            where = f"{variant} seed {seed} prior {truth + offset:.3f}"
            with bar.running(where):
                measures = run_one(overrides, seed, args.cache, round(truth + offset, 4))
            row = dict(zip(KEY, key, strict=True)) | measures | {"commit": commit}
            with atomic_path(args.out) as tmp:  # a kill mid-write loses no row
                pd.concat([rows, pd.DataFrame([row])], ignore_index=True).to_csv(
                    tmp, index=False, float_format="%.4f")
            bar.write(f"{where}: test {row['accuracy']:.4f} (best cut {row['acc_best_cut']:.4f},"
                      f" share cut {row['acc_share_cut']:.4f}), auc {row['roc_auc']:.4f}, "
                      f"{row['minutes']:.1f} min")
    bar.close()
    summarise(read_rows(args.out), args.out)


if __name__ == "__main__":
    main()
