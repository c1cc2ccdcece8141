"""Headline rows a user can trust: a preset's variant chosen by the validation estimate
(P and U alone) on some seeds, then reported on seeds that took no part in the choice.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/honest_rows.py --preset fmnist-i
        [--choose 0 1 2] [--report [3 4 5 6 7]] [--variants NAME ...] [--set KEY=VALUE ...]
        [--report-set KEY=VALUE ...] [--out reports/fmnist/honest.csv] [--cache DIR]

1. Every candidate variant (the preset's, or --variants; never one given the true
   prior) runs on each --choose seed.
2. The variant with the highest mean `val_est_accuracy` over those seeds leads; each
   other variant is compared with it seed by seed on the validation rows both scored
   (the paired difference, pucl.reporting.paired_choice, as `pucl bench` chooses). A
   variant whose difference's interval holds 0 ties; the cheapest tie that saves a
   tenth of the leader's minutes is chosen, else the leader. Each run's validation
   scores are kept beside the rows (`<out>_scores/`) so that a resumed run can pair
   them; rows measured before they were kept are ranked by their mean estimate alone.
3. The chosen variant is trained again on each --report seed with every labelled
   positive and every row of U (`split.val_fraction: 0`, as scikit-learn's
   GridSearchCV refits its best candidate on all the data): the validation part served
   the choice and is not held out of the model that is reported. Its test accuracy
   there is the headline: mean, std, n seeds, minutes per seed. With --no-refit the
   reported model keeps the validation part out, as the chosen runs did (role
   `report`, the protocol before refitting); the refit rows have role `refit`.
   --report-set changes the reported runs only (column `report_settings`), for example
   `--set split.folds=2 classifier.shipped=ensemble --report-set classifier.shipped=refit`:
   the choice reads the folds' estimates (the same with either shipped model) and the
   reported model is the one trained on every row, with its own cross-fitted estimate.

The validation estimate describes a model trained without the validation part: the
summary's `est_abs_miss` and `est_intervals_held` read the runs that have one (the
choosing seeds, and the reported seeds under --no-refit); a refit model has none.

Each run is a whole pipeline in process with tracking off (no MLflow or Prefect needed,
so it runs on a bare GPU worker too), in a temporary directory. Variants of one seed
share pretrained encoders through --cache, so a variant that changes only the head costs
its head. Every run is one CSV row, written as it ends (role `choose` or `report`); a
rerun skips the rows already there for the same preset, variant, settings and seed, so
an interrupted run goes on where it stopped. When the reported seeds are done,
`<out>_summary.csv` is rewritten from the rows: one line per preset and settings (the
chosen variant, its mean, std, n, minutes per seed, and its estimate's miss).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

os.environ.setdefault("PUCL_TRACKING", "off")  # before pucl reads it

import pandas as pd  # noqa: E402
import yaml  # noqa: E402

from pucl.io import atomic_path  # noqa: E402
from pucl.params.sweeps import REFIT  # noqa: E402  (pucl bench --refit's overrides)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # _commit, run as a file
from _commit import TEXT_COLUMNS, current_commit  # noqa: E402
from _pipeline import ENCODER_CACHE, RunsBar, run_once  # noqa: E402

KEY = ["preset", "variant", "settings", "seed"]
# the model a reported run's test accuracy is of (column `model`): trained on every row
# (`refit`), with a validation part held out (`held_out`), or under split.folds the folds'
# shipped model (`folds_refit`, `folds_ensemble`); rows written before the column by role
REPORTED_MODEL = {"report": "held_out", "refit": "refit"}
MODEL_SAYS = {"refit": "refit on all of P and U", "held_out": "validation part held out",
              "folds_refit": "refit on all of P and U, estimated by its folds",
              "folds_ensemble": "the folds' ensemble"}


def reported_model(metrics: dict, shipped: str) -> str:
    """A run's model, from its evaluate metrics and classifier.shipped (MODEL_SAYS)."""
    if int(metrics.get("val_folds", 0) or 0) > 0:
        return f"folds_{shipped}"
    return "held_out" if metrics.get("val_n_p", 0) else "refit"


def models_of(rows: pd.DataFrame) -> pd.Series:
    """Each row's model: its own `model`, else (rows written before it) by its role."""
    by_role = rows["role"].map(REPORTED_MODEL)
    return rows["model"].fillna(by_role) if "model" in rows else by_role


def candidates(preset: str, wanted: list[str] | None) -> dict[str, dict]:
    """name -> overrides of the variants that may be chosen: those asked for (or all the
    preset's), less any given the true prior, which a PU user cannot run."""
    from pucl.params.presets import load_preset
    from pucl.params.sweeps import variant_overrides
    from pucl.reporting.tables import prior_source

    spec = load_preset(preset)
    names = [spec.default if n == "default" else n for n in (wanted or list(spec.variants))]
    found = dict(variant_overrides(spec, name) for name in names)
    return {name: o for name, o in found.items()
            if prior_source({k: str(v) for k, v in o.items()}) != "oracle"}


def run_one(overrides: dict, seed: int, cache: Path) -> tuple[dict, pd.DataFrame]:
    """One whole pipeline: the metrics a row keeps, its minutes and work per seed (an
    encoder taken from the cache counted at what it cost to train,
    reporting.minutes_per_seed and work_per_seed), and its validation scores (what a
    paired choice reads)."""
    from pucl.reporting.tables import minutes_per_seed, work_per_seed
    from pucl.stages.runner import rollup

    run = run_once(overrides, seed, "honest-rows", cache,
                   keep=("evaluate", "validation_scores.csv"))
    metrics, stages = run.metrics, rollup(run.stages)
    keep = ("val_est_accuracy", "val_est_accuracy_low", "val_est_accuracy_high",
            "val_true_accuracy", "accuracy", "prior_estimate", "prior_true", "val_prior")
    return ({**{k: metrics.get(k, float("nan")) for k in keep},
             "minutes": minutes_per_seed(run.minutes, stages),
             "gmac": work_per_seed(stages), "model": reported_model(metrics, run.shipped),
             "stage_minutes": run.stage_minutes_json()}, run.kept)


def scores_path(out: Path, preset: str, variant: str, settings: str, seed: int) -> Path:
    """Where one choosing run's validation scores are kept (gzip CSV)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", settings)
    return out.with_name(f"{out.stem}_scores") / f"{preset}__{variant}__{slug}__s{seed}.csv.gz"


def summary_path(out: Path) -> Path:
    """Where the one-row-per-headline table derived from `out` goes."""
    return out.with_name(f"{out.stem}_summary.csv")


def read_rows(out: Path) -> pd.DataFrame:
    if not out.exists():
        return pd.DataFrame(columns=[*KEY, "role"])
    return pd.read_csv(out, keep_default_na=False, na_values=[""], dtype=TEXT_COLUMNS)


def report_settings(rows: pd.DataFrame) -> pd.Series:
    """Each row's --report-set overrides ("" for none, and for rows written before)."""
    if "report_settings" not in rows:
        return pd.Series("", index=rows.index)
    return rows["report_settings"].fillna("").astype(str)


def measured(rows: pd.DataFrame, preset: str, variant: str, settings: str, seed: int,
             refit: bool = False, reported: str = "") -> bool:
    """Whether this run is in `rows` already: a refit run and one that held the
    validation part out (roles choose and report) train different models, and a
    reported run with other --report-set overrides is another run."""
    return bool(((rows["preset"] == preset) & (rows["variant"] == variant)
                 & (rows["settings"] == settings) & (rows["seed"] == seed)
                 & ((rows["role"] == "refit") == refit)
                 & (report_settings(rows) == reported)).any())


def choose(rows: pd.DataFrame, preset: str, settings: str, seeds: list[int],
           variants: list[str], scores_of=lambda key: None) -> pd.DataFrame:
    """Per variant: its mean validation estimate over the choosing seeds, how it stands
    against the leader by the paired difference (`versus_leader`), and `chosen` marking
    the one pucl's rule picks. `scores_of(key)`: a run's validation scores (None: not
    kept), `key` being (variant, seed)."""
    from pucl.reporting.paired_choice import SEED, choose_paired
    from pucl.reporting.tables import chosen

    if "gmac" not in rows:  # rows written before work was counted: tied by minutes
        rows = rows.assign(gmac=float("nan"))
    mine = rows[(rows["preset"] == preset) & (rows["settings"] == settings)
                & rows["seed"].isin(seeds) & rows["variant"].isin(variants)
                & (rows["role"] == "choose")]
    table = (mine.groupby("variant", sort=False)
             .agg(val_est_accuracy=("val_est_accuracy", "mean"),
                  test_accuracy=("accuracy", "mean"), n=("seed", "count"),
                  minutes_per_seed=("minutes", "mean"),
                  gmac_per_seed=("gmac", "mean"))
             .reindex(variants).reset_index())
    frame = mine.assign(**{SEED: mine["seed"],
                           "run_id": [f"{v}|{s}" for v, s in zip(mine["variant"], mine["seed"],
                                                                 strict=True)]})
    if "val_prior" not in frame:
        frame = frame.assign(val_prior=float("nan"))
    paired = choose_paired(table, frame, ["variant"],
                           lambda run_id: scores_of(tuple(run_id.split("|"))))
    if paired is None:
        return table.assign(versus_leader="", chosen=chosen(table))
    return table.assign(versus_leader=paired.cells, chosen=paired.picks)


def summarise(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per preset and settings that has reported seeds: the chosen variant, its
    test accuracy on the reported seeds (mean, std, n, minutes and work per seed), and
    how its validation estimate fared against the validation rows' hidden labels on
    every seed it ran (mean absolute miss, intervals holding the truth)."""
    out = []
    reported, models = report_settings(rows), models_of(rows)
    for _, group in rows.groupby(["preset", "settings"], sort=False):
        runs = group[group["role"].isin(list(REPORTED_MODEL))]
        for (model, extra), report in runs.groupby([models[runs.index],
                                                    reported[runs.index]], sort=False):
            out.append({**headline(group, report), "model": model, "report_settings": extra})
    return pd.DataFrame(out)


def headline(group: pd.DataFrame, report: pd.DataFrame) -> dict:
    """The summary row of one preset and settings for the reported runs `report`; the
    estimate's record reads every run of the variant that has an estimate."""
    variant = report["variant"].iloc[0]
    runs = group[(group["variant"] == variant) & group["val_est_accuracy"].notna()]
    held = ((runs["val_est_accuracy_low"] <= runs["val_true_accuracy"])
            & (runs["val_true_accuracy"] <= runs["val_est_accuracy_high"]))
    return {"preset": report["preset"].iloc[0], "variant": variant,
            "settings": report["settings"].iloc[0],
            "choose_seeds": " ".join(map(str, sorted(group.loc[group["role"] == "choose",
                                                              "seed"].unique()))),
            "report_seeds": " ".join(map(str, sorted(report["seed"]))),
            "accuracy": report["accuracy"].mean(), "accuracy_std": report["accuracy"].std(ddof=0),
            "n": len(report), "minutes_per_seed": report["minutes"].mean(),
            "gmac_per_seed": report["gmac"].mean() if "gmac" in report else float("nan"),
            "est_abs_miss": (runs["val_est_accuracy"] - runs["val_true_accuracy"]).abs().mean(),
            "est_intervals_held": f"{int(held.sum())}/{len(runs)}",
            "commit": " ".join(sorted(pd.concat([group[group["role"] == "choose"], report])
                                      ["commit"].astype(str).unique()))}


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", required=True)
    parser.add_argument("--choose", type=int, nargs="+", default=[0, 1, 2])
    # a probe of a candidate on one choosing seed stops there: `--report` alone
    parser.add_argument("--report", type=int, nargs="*", default=[3, 4, 5, 6, 7],
                        help="the seeds the chosen variant is reported on (default 3-7; "
                             "none: choose and stop)")
    parser.add_argument("--variants", nargs="+", default=None,
                        help="candidates (default: the preset's; 'default' is its default)")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="params overrides for every run (values parsed as YAML)")
    parser.add_argument("--report-set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="params overrides for the reported runs only, after --set")
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "fmnist" / "honest.csv")
    parser.add_argument("--cache", type=Path, default=ENCODER_CACHE,
                        help="pretrained encoders shared by fingerprint between runs and "
                             "sessions (default: data/cache/measurements)")
    parser.add_argument("--refit", action=argparse.BooleanOptionalAction, default=True,
                        help="train the reported model on the validation part too "
                             "(default; --no-refit: hold it out as the choice did)")
    args = parser.parse_args(argv)
    if overlap := set(args.choose) & set(args.report):
        parser.error(f"--choose and --report share seeds {sorted(overlap)}: a reported seed "
                     "must take no part in the choice")
    return args


def main() -> None:
    args = arguments()
    commit = current_commit()
    settings, reported = " ".join(args.set) or "default", " ".join(args.report_set)
    extra, report_extra = ({key: yaml.safe_load(value) for key, value in
                            (item.split("=", 1) for item in items)}
                           for items in (args.set, args.report_set))
    variants = candidates(args.preset, args.variants)
    bar = RunsBar(len(args.choose) * len(variants) + len(args.report), args.preset)

    def run(variant: str, seed: int, role: str) -> None:
        rows, mine = read_rows(args.out), reported if role != "choose" else ""
        if measured(rows, args.preset, variant, settings, seed, role == "refit", mine):
            bar.skip()
            return
        where = f"{variant} seed {seed}"
        with bar.running(where):
            measures, scores = run_one({**variants[variant], **extra,
                                        **(REFIT if role == "refit" else {}),
                                        **(report_extra if role != "choose" else {})},
                                       seed, args.cache)
        if role == "choose" and scores is not None and len(scores):
            kept = scores_path(args.out, args.preset, variant, settings, seed)
            kept.parent.mkdir(parents=True, exist_ok=True)
            with atomic_path(kept) as tmp:
                scores.to_csv(tmp, index=False, float_format="%.6g", compression="gzip")
        row = {"preset": args.preset, "variant": variant, "settings": settings, "seed": seed,
               "role": role, "report_settings": mine, **measures, "commit": commit}
        with atomic_path(args.out) as tmp:  # a kill mid-write loses no row
            pd.concat([rows, pd.DataFrame([row])], ignore_index=True).to_csv(
                tmp, index=False, float_format="%.4f")
        bar.write(f"{args.preset} {where} ({role}): val est {row['val_est_accuracy']:.4f}, "
                  f"test {row['accuracy']:.4f}, {row['minutes']:.1f} min")

    for seed in args.choose:  # seed by seed: the variants of a seed share its encoders
        for variant in variants:
            run(variant, seed, "choose")
    def scores_of(key: tuple[str, str]) -> pd.DataFrame | None:
        path = scores_path(args.out, args.preset, key[0], settings, int(key[1]))
        return pd.read_csv(path, compression="gzip") if path.exists() else None

    table = choose(read_rows(args.out), args.preset, settings, args.choose, list(variants),
                   scores_of)
    bar.write(table.to_string(index=False))
    picked = table.loc[table["chosen"], "variant"].tolist()
    if not picked:
        raise SystemExit(f"no candidate of {args.preset} has a validation estimate (variants "
                         f"{list(variants) or 'none'} without the true prior; "
                         "split.val_fraction above 0)")
    bar.write(f"chosen by the validation estimate on seeds {args.choose}: {picked[0]}")
    role = "refit" if args.refit else "report"
    for seed in args.report:
        run(picked[0], seed, role)
    bar.close()
    rows = read_rows(args.out)
    summary = summarise(rows)
    with atomic_path(summary_path(args.out)) as tmp:
        summary.to_csv(tmp, index=False, float_format="%.4f")
    if not args.report:  # choose and stop: no reported rows to summarise
        return
    these = rows[(rows["preset"] == args.preset) & (rows["settings"] == settings)
                 & (rows["role"] == role) & (report_settings(rows) == reported)
                 & rows["seed"].isin(args.report)]
    model = models_of(rows)[these.index[-1]]
    mine = summary[(summary["preset"] == args.preset) & (summary["settings"] == settings)
                   & (summary["model"] == model)
                   & (summary["report_settings"] == reported)].iloc[0]
    if " " in mine["commit"]:  # resumed across commits: say so, the rows stay
        print(f"note: these rows were measured at commits {mine['commit']}")
    print(f"{mine['variant']} ({MODEL_SAYS.get(model, model)}) on fresh seeds "
          f"{mine['report_seeds']}: test accuracy "
          f"{100 * mine['accuracy']:.2f} +- {100 * mine['accuracy_std']:.2f} (n {mine['n']}), "
          f"{mine['minutes_per_seed']:.1f} min per seed; its estimate missed by "
          f"{mine['est_abs_miss']:.3f} on average, intervals held {mine['est_intervals_held']}")


if __name__ == "__main__":
    main()
