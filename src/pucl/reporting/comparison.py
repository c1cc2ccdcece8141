"""Comparison of pipeline runs read back from MLflow: table, markdown and figure on disk,
and logged to the sweep's parent run (`pucl compare`, and the sweep flow at its end)."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from pucl import tracking
from pucl.errors import PuclError
from pucl.io import atomic_path, save_figure, write_table
from pucl.reporting.paired_choice import ScoresOf, choose_paired
from pucl.reporting.tables import (
    choice_lines,
    comparison_table,
    gamma_figure,
    runs_frame,
    to_markdown,
    with_std,
)

PAIRED_COLUMN = "leader - this (paired)"


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


def validation_scores_of(store: tracking.Store) -> ScoresOf:
    """Run id -> the validation_scores.csv its evaluate stage logged (None: none)."""
    def load(run_id: str) -> pd.DataFrame | None:
        evaluated = [r for r in store.children(run_id) if r.tags.get("stage") == "evaluate"]
        if not evaluated:
            return None
        with tempfile.TemporaryDirectory() as tmp:
            try:
                path = store.client.download_artifacts(evaluated[0].run_id,
                                                       "validation_scores.csv", tmp)
            except Exception:  # a run from before the file, or an artefact store gone
                return None
            return pd.read_csv(path)

    return load


@dataclass
class Comparison:
    frame: pd.DataFrame
    table: pd.DataFrame
    files: list[Path]
    choice: list[str]  # the row the validation estimate chose (none without estimates)


def compare_runs(runs: Sequence[tracking.RunRecord], out_dir: Path, by: Sequence[str] = (),
                 hue: str = "pretrain.loss", title: str = "runs",
                 log_to: tracking.Run | None = None,
                 scores_of: ScoresOf | None = None, within: Sequence[str] = ()
                 ) -> Comparison:
    """Write comparison.csv / comparison.md / accuracy_vs_gamma.png under `out_dir` and
    log them to `log_to` (a sweep's parent run). The markdown names the row the
    validation estimate chose (reporting.chosen); grouped (`by`) and given the runs'
    validation scores (`scores_of`), by the paired difference, a tie going to the
    cheaper group, one choice per value of `within` (reporting.paired_choice); the table
    then has the `chosen` column and the paired one."""
    if not runs:
        raise NotFound("no finished pipeline runs to compare")
    frame = runs_frame(_record(r) for r in runs)
    try:
        table = comparison_table(frame, by)
    except ValueError as exc:
        raise NotFound(str(exc)) from None
    csv, md, png = (out_dir / "comparison.csv", out_dir / "comparison.md",
                    out_dir / "accuracy_vs_gamma.png")
    paired = (choose_paired(table, frame, by, scores_of, within) if by and scores_of
              else None)
    if paired is None:
        choice = choice_lines(table, list(by) or ["run", "variant"], within)
    else:
        table = table.assign(**{PAIRED_COLUMN: paired.cells, "chosen": paired.picks})
        choice = choice_lines(table, list(by), picks=paired.picks)
        for leader in paired.leaders:
            if not paired.picks[leader]:
                lead = ", ".join(f"{k}={table.loc[leader, k]}" for k in by)
                choice.append(f"(a tie by the paired difference with the leader, {lead}: "
                              "the clearly cheaper per seed, by work or else minutes, is "
                              "chosen)")
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
