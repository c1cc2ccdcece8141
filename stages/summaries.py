"""Tables that summarise several pipeline runs (mean +- std over seeds)."""

from __future__ import annotations

import pandas as pd

METRICS = {"knn_accuracy": "kNN acc. (oracle)", "pseudo_label_accuracy": "PUPL acc. (oracle)",
           "accuracy": "test acc."}


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
        "| n_p | gamma | objective | " + " | ".join(METRICS.values()) + " |",
        "|---|---|---|" + "---|" * len(METRICS),
    ]
    for (n_p, loss), group in grouped:
        cells = []
        for key in METRICS:
            std = group[key].std(ddof=0)
            cells.append(f"{group[key].mean():.4f} +- {std:.4f}")
        lines.append(f"| {n_p} | {group['gamma'].iloc[0]:.3f} | {loss} | " + " | ".join(cells)
                     + " |")
    return "\n".join(lines) + "\n", frame
