"""Run comparison: tables of pipeline runs and the accuracy-against-gamma figure.

Pure functions over plain run records ({name, run_id, params, metrics}); `pucl compare`
and the sweep flow read the records from MLflow and write what these return.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from pucl.errors import did_you_mean

# What pucl chooses a variant by: the label-free estimate on the validation part (P and U
# alone, docs/evaluation.md), never a test metric.
CHOICE_METRIC = "val_est_accuracy"
KEY_METRICS = (CHOICE_METRIC, "accuracy", "f1", "roc_auc", "prior_abs_error",
               "pseudo_label_accuracy", "knn_accuracy", "knn_accuracy_trunk",
               "knn_accuracy_inputs", "prototype_bias")
# metrics.json as a reader takes it in (metric_sections): the labelled test results, then
# what P and U alone say, then every other entry as a diagnostic
RESULT_METRICS = ("accuracy", "f1", "roc_auc", "precision", "recall")
ESTIMATE_METRICS = (CHOICE_METRIC, "val_est_f1", "val_est_auc", "prior_estimate")
# runs_frame's columns read from params, times and work
DERIVED = ("prior_source", "minutes_per_seed", "gmac_per_seed")
PAIRING = ("val_prior", "val_prior_error")  # runs_frame's columns that pair validation scores
# Params that change how a run executes, not what it computes.
EXECUTION_PARAMS = ("base.device", "base.threads", "base.fit_workers", "tracking.uri",
                    "tracking.experiment")


def _value(text: Any) -> Any:
    """MLflow stores params as strings: give numbers back their type for sorting."""
    if not isinstance(text, str):
        return text
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def runs_frame(records: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """One row per run: `run`, `run_id`, every param (`param:` prefix dropped), `gamma`
    and the key metrics present."""
    rows = []
    for rec in records:
        row = {"run": rec["name"], "run_id": rec["run_id"]}
        if rec.get("variant"):  # a sweep variant's name (tag), grouped like a param
            row["variant"] = rec["variant"]
        row.update({k: _value(v) for k, v in rec.get("params", {}).items()})
        metrics = rec.get("metrics", {})
        row["gamma"] = metrics.get("gamma", np.nan)
        row.update({m: metrics.get(m, np.nan) for m in (*KEY_METRICS, *PAIRING)})
        row["prior_source"] = prior_source(rec.get("params", {}))
        row["minutes_per_seed"] = minutes_per_seed(rec.get("minutes"), metrics)
        row["gmac_per_seed"] = work_per_seed(metrics)
        rows.append(row)
    return pd.DataFrame(rows)


def prior_source(params: dict[str, Any]) -> str:
    """Where a run's class prior came from: `oracle` when any prior consumer was given the
    true prior, `given` for a number, else the estimator (`prior.method`)."""
    settings = [str(params.get(k, "")) for k in ("prior.method", "pretrain.prior",
                                                 "classifier.prior")]
    if "oracle" in settings:
        return "oracle"
    if any(_value(v) != v for v in settings[1:] if v):
        return "given"  # a number in pretrain.prior / classifier.prior
    if settings[0] == "given":
        return "given"  # prior.value
    return settings[0] or "-"


def minutes_per_seed(minutes: float | None, metrics: dict[str, float]) -> float:
    """A pipeline run's wall minutes, with a pretraining restored from the cache counted
    at what it cost when it ran: every variant pays for its encoder once per seed."""
    if minutes is None:
        return np.nan
    reused = metrics.get("pretrain_reused", 0.0) == 1.0
    return minutes + (metrics.get("pretrain_seconds", 0.0) / 60 if reused else 0.0)


def work_per_seed(metrics: dict[str, float]) -> float:
    """A pipeline run's work in GMACs (pucl.runtime.work): the sum of its stages'
    (`work_gmac_<stage>`), with the pretraining counted at what its encoders took to
    train (`pretrain_gmac`, theirs whether trained now or restored from the cache) where
    that is more than the stage did; nan for a run recorded before work was counted, or
    whose encoders all came from a cache entry that did not record its own."""
    stages = {k: v for k, v in metrics.items() if k.startswith("work_gmac_")}
    if not stages:
        return np.nan
    pretrain = stages.pop("work_gmac_pretrain", 0.0)
    trained = metrics.get("pretrain_gmac", np.nan)
    if not np.isnan(trained):
        pretrain = max(pretrain, trained)
    elif metrics.get("pretrain_reused", 0.0) == 1.0:
        return np.nan
    return float(sum(stages.values()) + pretrain)


def param_columns(frame: pd.DataFrame) -> list[str]:
    fixed = {"run", "run_id", "gamma", *KEY_METRICS, *DERIVED, *PAIRING}
    return [c for c in frame.columns if c not in fixed]


def varying_params(frame: pd.DataFrame) -> list[str]:
    """Params whose value differs between runs (missing counts as a value)."""
    out = []
    for col in param_columns(frame):
        if col in EXECUTION_PARAMS:
            continue
        if frame[col].astype(str).nunique(dropna=False) > 1:
            out.append(col)
    # the seed last: rows of one configuration then sit together
    return sorted(out, key=lambda c: c == "base.seed")


def comparison_table(frame: pd.DataFrame, by: Sequence[str] = ()) -> pd.DataFrame:
    """Without `by`: one row per run, with the params that differ and the key metrics.
    With `by`: one row per value of those params, metrics as mean and std over the runs
    in the group (`n` of them)."""
    metrics = [m for m in KEY_METRICS if m in frame and frame[m].notna().any()]
    if frame.empty:
        return pd.DataFrame(columns=["run", *metrics])
    unknown = [b for b in by if b not in frame.columns]
    if unknown:
        differ = varying_params(frame)
        raise ValueError(f"unknown parameter {unknown[0]!r} for --by"
                         f"{did_you_mean(unknown[0], param_columns(frame))} (params that "
                         f"differ between these runs: {', '.join(differ) or 'none'}; any "
                         f"of the {len(param_columns(frame))} params of params.yaml works)")
    gamma = ["gamma"] if frame["gamma"].notna().any() else []
    derived = [c for c in DERIVED if c in frame]
    if not by:
        varying = varying_params(frame)
        table = frame[["run", *varying, *gamma, *metrics, *derived]]
        return table.sort_values([*varying, "run"] if varying else ["run"],
                                 kind="stable").reset_index(drop=True)
    grouped = frame.groupby(list(by), dropna=False, sort=True)
    table = grouped[[*gamma, *metrics]].mean()
    for m in metrics:
        table[f"{m}_std"] = grouped[m].std(ddof=0)
    table["n"] = grouped.size()
    ordered = [c for m in [*gamma, *metrics] for c in (m, f"{m}_std") if c in table]
    extra = []
    if "prior_source" in frame:
        # a group with any run given the true prior is an oracle group (never chosen)
        table["prior_source"] = grouped["prior_source"].agg(
            lambda s: s.iloc[0] if s.nunique() == 1 else
            "oracle" if (s == "oracle").any() else "mixed")
        extra.append("prior_source")
    for cost in ("minutes_per_seed", "gmac_per_seed"):
        if cost in frame:
            table[cost] = grouped[cost].mean()
            extra.append(cost)
    table = table[[*ordered, "n", *extra]].reset_index()
    first = [*by, *extra[:1]]  # the report's order: variant, prior_source, accuracy, ...
    return table[[*first, *[c for c in table.columns if c not in first]]]


def chosen(table: pd.DataFrame, within: Sequence[str] = ()) -> np.ndarray:
    """bool per row: the row with the highest validation estimate (CHOICE_METRIC; the
    first on a tie) among the rows of each value of `within` (among all rows without),
    which is how pucl chooses from P and U alone. None chosen where no row has one. A
    row given the true prior (prior_source `oracle`) is never chosen: a PU user cannot
    run it, and its estimate reads that true prior."""
    if CHOICE_METRIC not in table or table.empty:
        return np.zeros(len(table), dtype=bool)
    score = table[CHOICE_METRIC].reset_index(drop=True)
    if "prior_source" in table:
        score = score.where(table["prior_source"].reset_index(drop=True) != "oracle")
    keys = (table[list(within)].astype(str).agg("|".join, axis=1).reset_index(drop=True)
            if within else pd.Series(0, index=score.index))
    picks = score.dropna().groupby(keys[score.notna()], sort=False).idxmax()
    return score.index.isin(picks.to_numpy())


def choice_lines(table: pd.DataFrame, keys: Sequence[str], within: Sequence[str] = (),
                 picks: np.ndarray | None = None) -> list[str]:
    """One line per chosen row (`chosen`, or the mask `picks`): what was chosen, named by
    `keys`, and by what."""
    lines = []
    for rec in table[chosen(table, within) if picks is None else picks].to_dict("records"):
        what = ", ".join(f"{k}={format_cell(rec[k])}" for k in keys if k in rec)
        lines.append(f"chosen by the validation estimate ({CHOICE_METRIC} "
                     f"{rec[CHOICE_METRIC]:.4f}, from P and U alone): {what}")
    return lines


def with_std(table: pd.DataFrame) -> pd.DataFrame:
    """For display: `m` and `m_std` columns merged into one 'mean +- std' column."""
    out = table.copy()
    for col in list(out.columns):
        if f"{col}_std" in out.columns:
            out[col] = [f"{format_cell(m)} +- {format_cell(s)}"
                        for m, s in zip(out[col], out[f"{col}_std"], strict=True)]
            out = out.drop(columns=f"{col}_std")
    return out


def bench_table(grouped: pd.DataFrame,
                reference: Callable[[dict[str, Any]], float | None],
                within: Sequence[str] = (), picks: np.ndarray | None = None
                ) -> pd.DataFrame:
    """A grouped comparison (comparison_table with `by`) as the paper prints it: test
    accuracy in percent, mean +- population std, beside the published number and the
    difference (ours - paper) where `reference(row)` gives one for the row's variant and
    grid point. Where the runs have a validation estimate, its column comes first and
    `chosen` marks, per grid point (`within`), the variant it chose (or the mask
    `picks`: the paired choice of reporting.paired_choice)."""
    keys = [c for c in grouped.columns
            if c not in {"n", "gamma", "gamma_std"} and c not in KEY_METRICS
            and not c.endswith("_std") and c != "chosen"]
    estimated = CHOICE_METRIC in grouped and grouped[CHOICE_METRIC].notna().any()
    picked = chosen(grouped, within) if picks is None else picks
    rows = []
    for rec, pick in zip(grouped.to_dict("records"), picked, strict=True):
        mean, std = 100 * rec["accuracy"], 100 * rec.get("accuracy_std", np.nan)
        row = {k: rec[k] for k in keys}
        if estimated:
            row["val est %"] = (f"{100 * rec[CHOICE_METRIC]:.1f} +- "
                                f"{100 * rec.get(CHOICE_METRIC + '_std', np.nan):.1f}")
            row["chosen"] = "yes" if pick else ""
        row["accuracy %"] = f"{mean:.1f} +- {std:.1f}"
        paper = reference(rec)
        row["paper %"] = f"{paper:.1f}" if paper is not None else "-"
        row["ours - paper"] = f"{mean - paper:+.1f}" if paper is not None else "-"
        if "prior_abs_error" in rec:
            row["|prior error|"] = format_cell(rec["prior_abs_error"])
        row["n"] = int(rec["n"])
        rows.append(row)
    return pd.DataFrame(rows)


def metric_sections(metrics: dict[str, Any]) -> list[tuple[str, list[tuple[str, str]]]]:
    """(section, [(name, value as text)]) in reading order: `test results` (RESULT_METRICS),
    `from P and U alone` (ESTIMATE_METRICS, each with its interval `[low, high]` beside
    it), then `diagnostics`: every other entry by name. Each entry appears once; an empty
    section is left out."""
    def text(value: Any) -> str:
        return f"{value:.4f}" if isinstance(value, float) else str(value)

    estimates = []
    for name in ESTIMATE_METRICS:
        if name in metrics:
            low, high = metrics.get(f"{name}_low"), metrics.get(f"{name}_high")
            interval = f" [{low:.3f}, {high:.3f}]" if low is not None and high is not None else ""
            estimates.append((name, text(metrics[name]) + interval))
    shown = {*RESULT_METRICS, *(n for name, _ in estimates
                                for n in (name, f"{name}_low", f"{name}_high"))}
    sections = [("test results", [(n, text(metrics[n])) for n in RESULT_METRICS if n in metrics]),
                ("from P and U alone", estimates),
                ("diagnostics", [(n, text(v)) for n, v in sorted(metrics.items())
                                 if n not in shown])]
    return [(title, rows) for title, rows in sections if rows]


def headline(metrics: dict[str, Any]) -> str:
    """One line of what a run achieved: its test results and its estimates from P and U
    (metric_sections' first two parts), for a log that has no room for the table."""
    parts = [f"{name} {value}" for title, rows in metric_sections(metrics)
             if title != "diagnostics" for name, value in rows]
    return ", ".join(parts) or "no metrics"


def format_cell(value: Any) -> str:
    if isinstance(value, (float, np.floating)):
        return "nan" if not np.isfinite(value) else f"{value:.4f}"
    return str(value)


def to_markdown(table: pd.DataFrame) -> str:
    header = "| " + " | ".join(str(c) for c in table.columns) + " |"
    rule = "|" + "|".join("---" for _ in table.columns) + "|"
    rows = ["| " + " | ".join(format_cell(v) for v in row) + " |"
            for row in table.itertuples(index=False)]
    return "\n".join([header, rule, *rows]) + "\n"


def gamma_figure(frame: pd.DataFrame, hue: str = "pretrain.loss", metric: str = "accuracy"):
    """Test `metric` against gamma = n_p / n_u, one line per `hue` value, mean +- std over
    the other runs at each gamma (the paper's Figure 11)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    data = frame.dropna(subset=["gamma", metric])
    groups = data.groupby(hue, sort=True) if hue in data else [("all runs", data)]
    for label, part in groups:
        grouped = part.groupby("gamma")[metric]
        stats = pd.DataFrame({"mean": grouped.mean(), "std": grouped.std(ddof=0)}).reset_index()
        ax.errorbar(stats["gamma"], stats["mean"], yerr=stats["std"].fillna(0.0),
                    marker="o", capsize=3, label=str(label))
    if len(data) and data["gamma"].nunique() > 1:
        ax.set_xscale("log")
    ax.set(xlabel="gamma = n_p / n_u", ylabel=f"test {metric} (mean +- std)",
           title=f"{metric} against gamma" + (f" by {hue}" if hue in data else ""))
    ax.grid(alpha=0.3)
    if len(data):
        ax.legend(fontsize=8)
    return fig


ABLATION_METRICS = {"knn_accuracy": "kNN acc. (oracle)",
                    "pseudo_label_accuracy": "PUPL acc. (oracle)", "accuracy": "test acc."}


def ablation_tables(rows: list[dict], epochs: int) -> tuple[str, pd.DataFrame]:
    """Per-run rows -> (markdown of mean +- std per objective and n_p, per-run frame)."""
    frame = pd.DataFrame(rows)
    grouped = frame.groupby(["n_p", "loss"], sort=True)
    seeds = sorted(frame["seed"].unique().tolist())
    lines = [
        f"# Objective ablation ({epochs} pretraining epochs, seeds {seeds})",
        "",
        "Mean +- std over seeds. PUNCE and DCL use the true prior of U (oracle).",
        "",
        "| n_p | gamma | objective | " + " | ".join(ABLATION_METRICS.values()) + " |",
        "|---|---|---|" + "---|" * len(ABLATION_METRICS),
    ]
    for (n_p, loss), group in grouped:
        cells = []
        for key in ABLATION_METRICS:
            std = group[key].std(ddof=0)
            cells.append(f"{group[key].mean():.4f} +- {std:.4f}")
        lines.append(f"| {n_p} | {group['gamma'].iloc[0]:.3f} | {loss} | " + " | ".join(cells)
                     + " |")
    return "\n".join(lines) + "\n", frame


def retrain_history_figures(versions: list[dict[str, Any]]) -> dict[str, Any]:
    """Two figures from the registered versions (`Store.versions`): the holdout score of
    each version, the champion marked, and the prior estimate of U over data versions."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def number(v: dict, key: str) -> float:
        try:
            return float(v["tags"].get(key, "nan"))
        except ValueError:
            return float("nan")

    numbers = [v["version"] for v in versions]
    scores = [number(v, "holdout_score") for v in versions]
    score_fig, ax = plt.subplots(figsize=(5.5, 3.4))
    ax.plot(numbers, scores, marker="o", label="version")
    champions = [v for v in versions if "champion" in v["aliases"]]
    if champions:
        ax.scatter([c["version"] for c in champions],
                   [number(c, "holdout_score") for c in champions], s=160,
                   facecolors="none", edgecolors="red", label="champion")
    ax.set(xlabel="model version", ylabel="holdout score",
           title="holdout score of each registered version")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)

    by_data: dict[str, float] = {}
    for v in versions:  # one point per data version, in the order they first appeared
        by_data.setdefault(v["tags"].get("data.version", "?"), number(v, "prior_estimate"))
    prior_fig, ax = plt.subplots(figsize=(5.5, 3.4))
    ax.plot(range(1, len(by_data) + 1), list(by_data.values()), marker="o")
    ax.set_xticks(range(1, len(by_data) + 1), [k[:7] for k in by_data], rotation=30,
                  fontsize=7)
    ax.set(xlabel="data version", ylabel="estimated prior of U",
           title="class prior over data versions")
    ax.grid(alpha=0.3)
    return {"champion_holdout_score.png": score_fig, "prior_by_data_version.png": prior_fig}


def monitor_figure(batches: list[dict[str, Any]]):
    """The watched batches (`pucl data add`, in order): the champion's estimated accuracy
    on each with its interval beside its holdout accuracy, alerts circled in red; and U's
    prior on each. `batches`: dicts of batch, estimated_accuracy, low, high, reference,
    prior, alert (missing numbers NaN)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (acc, prior) = plt.subplots(1, 2, figsize=(10, 3.4))
    at = np.arange(len(batches))
    value = np.array([b["estimated_accuracy"] for b in batches], float)
    low = np.array([b["low"] for b in batches], float)
    high = np.array([b["high"] for b in batches], float)
    acc.errorbar(at, value, yerr=[value - low, high - value], fmt="o", capsize=3,
                 label="estimated on the batch")
    acc.plot(at, [b["reference"] for b in batches], "k_", markersize=14,
             label="on the holdout")
    alerts = [i for i, b in enumerate(batches) if b.get("alert")]
    acc.scatter(at[alerts], value[alerts], s=120, facecolors="none", edgecolors="red",
                label="monitor.alert")
    prior.plot(at, [b["prior"] for b in batches], marker="o")
    for ax, label in ((acc, "champion's accuracy"), (prior, "estimated prior of U")):
        ax.set_xticks(at, [b["batch"] for b in batches], fontsize=7)
        ax.set(xlabel="batch", ylabel=label)
        ax.grid(alpha=0.3)
    acc.legend(fontsize=7)
    acc.set_title("the champion on each arriving batch")
    prior.set_title("class prior of each arriving batch")
    return fig
