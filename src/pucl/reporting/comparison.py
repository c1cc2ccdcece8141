"""Comparison of pipeline runs read back from MLflow: table, markdown and figure on disk,
and logged to the sweep's parent run (`pucl compare`, and the sweep flow at its end)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from pucl import tracking
from pucl.errors import PuclError
from pucl.io import atomic_path, save_figure, write_table
from pucl.reporting.tables import (
    choice_lines,
    comparison_table,
    gamma_figure,
    runs_frame,
    to_markdown,
    with_std,
)


class NotFound(PuclError):
    """No runs (or no such sweep) to compare."""


def _record(run: tracking.RunRecord) -> dict:
    return {"name": run.name, "run_id": run.run_id, "params": run.params,
            "metrics": run.metrics, "variant": run.tags.get("variant"), "minutes": run.minutes}


def find_sweep(store: tracking.Store, ref: str) -> tracking.RunRecord:
    """A sweep parent run by id, by name, or `latest`."""
    sweeps = store.runs("tags.kind = 'sweep'")
    if ref == "latest":
        if not sweeps:
            raise NotFound("no sweep runs in this experiment (run: pucl sweep --grid FILE)")
        return sweeps[-1]
    matches = [r for r in sweeps if ref in (r.run_id, r.name, r.tags.get("sweep"))]
    if not matches:
        names = sorted({r.tags.get("sweep", r.name) for r in sweeps}) or ["none"]
        raise NotFound(f"no sweep named or with id {ref!r} (sweeps: {', '.join(names)})")
    return matches[-1]


def pipeline_runs(store: tracking.Store, parent_id: str | None = None,
                  finished_only: bool = True) -> list[tracking.RunRecord]:
    query = "tags.kind = 'pipeline'"
    if parent_id:
        query += f" and tags.mlflow.parentRunId = '{parent_id}'"
    if finished_only:
        query += " and attributes.status = 'FINISHED'"
    return store.runs(query)


@dataclass
class Comparison:
    frame: pd.DataFrame
    table: pd.DataFrame
    files: list[Path]
    choice: list[str]  # the row the validation estimate chose (none without estimates)


def compare_runs(runs: Sequence[tracking.RunRecord], out_dir: Path, by: Sequence[str] = (),
                 hue: str = "pretrain.loss", title: str = "runs",
                 log_to: tracking.Run | None = None) -> Comparison:
    """Write comparison.csv / comparison.md / accuracy_vs_gamma.png under `out_dir` and
    log them to `log_to` (a sweep's parent run). The markdown names the row the
    validation estimate chose (reporting.chosen)."""
    if not runs:
        raise NotFound("no finished pipeline runs to compare")
    frame = runs_frame(_record(r) for r in runs)
    try:
        table = comparison_table(frame, by)
    except ValueError as exc:
        raise NotFound(str(exc)) from None
    csv, md, png = (out_dir / "comparison.csv", out_dir / "comparison.md",
                    out_dir / "accuracy_vs_gamma.png")
    choice = choice_lines(table, list(by) or ["run", "variant"])  # a row per group or run
    write_table(csv, table)
    with atomic_path(md) as tmp:
        tmp.write_text(f"# Comparison: {title}\n\n{len(frame)} pipeline runs"
                       + (f", grouped by {', '.join(by)}" if by else "") + ".\n\n"
                       + "".join(f"{line[0].upper()}{line[1:]}.\n\n" for line in choice)
                       + to_markdown(with_std(table)))
    save_figure(png, gamma_figure(frame, hue=by[0] if by else hue))
    if log_to is not None:
        for path in (csv, md, png):
            log_to.log_artifact(path, "comparison")
    return Comparison(frame, table, [csv, md, png], choice)
