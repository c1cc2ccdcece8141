"""What every command shares: the Typer app, the consoles, one-line errors, the project,
validated --set overrides, tables, and running a flow against one Prefect API."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from pucl import tracking
from pucl.errors import PuclError, debugging, disk_full
from pucl.runtime.environment import quiet_defaults

app = typer.Typer(help="Contrastive PU learning pipeline (DVC stages, MLflow tracking).",
                  no_args_is_help=True, add_completion=False,
                  rich_markup_mode="markdown")  # wrapped docstring lines join up
err = Console(stderr=True, soft_wrap=True)  # one error, one line, whatever the width
# Tables of runs are wide: do not squeeze them to 80 columns when piped to a file.
out = Console() if sys.stdout.isatty() else Console(width=220)

SetOption = Annotated[list[str] | None, typer.Option(
    "--set", "-s", help="override a param for this run: section.name=value (repeatable)")]


def fail(message: str, code: int = 2) -> None:
    """One line on stderr and exit `code`; under PUCL_DEBUG=1 the traceback of the error
    being handled comes first."""
    _tell(message)
    raise typer.Exit(code)


def _tell(message: str) -> None:
    from rich.markup import escape

    if debugging() and sys.exc_info()[0] is not None:
        import traceback

        traceback.print_exc()
    err.print(f"[red]pucl: error:[/red] {escape(message)}", highlight=False)


@contextmanager
def fail_on_full_disk() -> Iterator[None]:
    """A full disk (pucl.errors.disk_full), however deep it was raised, as one line and
    exit 2; any other error as before."""
    try:
        yield
    except Exception as exc:
        full = disk_full(exc)
        if full is None:
            raise
        _tell(str(full))  # outside the app: exit as a program, not as a Typer command
        raise SystemExit(full.exit_code) from None


def metrics_table(path: Path) -> Table | None:
    if not path.exists():
        return None
    return sections_table(json.loads(path.read_text()),
                          f"results, estimates and diagnostics: {path.name}")


def sections_table(metrics: dict, title: str) -> Table:
    """A run's metrics in reading order (reporting.tables.metric_sections): the test
    results, the estimates from P and U with their intervals, then the diagnostics."""
    from pucl.reporting.tables import metric_sections

    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for title, rows in metric_sections(metrics):
        table.add_section()
        table.add_row(f"[bold]{title}[/bold]", "")
        for key, value in rows:
            table.add_row(key, value)
    return table


def parse_ints(text: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        fail(f"expected comma-separated integers, got {text!r}")
        raise  # unreachable


def project_or_exit() -> Path:
    root = tracking.project_root()
    if not (root / "params.yaml").exists():
        fail(f"no params.yaml in {root} or its parents: run pucl inside the project")
    return root


PresetOption = Annotated[str | None, typer.Option(
    help="start from a preset's settings (params/presets/NAME.yaml, or a sweep file path) "
         "and its default variant; --set still wins")]
VariantOption = Annotated[str | None, typer.Option(
    help="with --preset: this variant instead of the preset's default")]


def preset_or_exit(root: Path, preset: str):
    """A preset by name (params/presets/NAME.yaml) or path, or one line and exit 2."""
    from pucl.params.presets import load_preset

    try:
        return load_preset(preset, [root])
    except PuclError as exc:
        fail(str(exc), exc.exit_code)
        raise  # unreachable


def preset_overrides(root: Path, preset: str | None,
                      variant: str | None) -> tuple[dict, dict[str, str]]:
    """The overrides and MLflow tags of --preset/--variant ({} and {} without a preset)."""
    if preset is None:
        if variant is not None:
            fail(f"--variant {variant!r} needs --preset (the preset it belongs to)")
        return {}, {}
    from pucl.params.sweeps import variant_overrides

    spec = preset_or_exit(root, preset)
    try:
        name, overrides = variant_overrides(spec, variant)
    except PuclError as exc:
        fail(str(exc), exc.exit_code)
        raise  # unreachable
    return overrides, {"preset": spec.name, "variant": name}


def validated_overrides(root: Path, assignments: list[str] | None,
                         base: dict | None = None) -> dict:
    """Parse --set values and validate params.yaml with them (on top of `base`, a
    preset's settings), before any work starts."""
    from pucl.params.config import anchor_paths, parse_assignments
    from pucl.stages.runner import resolve_params

    try:
        overrides = {**(base or {}),
                     **anchor_paths(parse_assignments(assignments or []), Path.cwd())}
        params = resolve_params(root, overrides)
        from pucl.stages.preflight import check_inputs

        check_inputs(params, root)
    except PuclError as exc:
        fail(str(exc), exc.exit_code)
    return overrides


def prefect_env() -> None:
    quiet_defaults()


def run_flow(call, scheduler: bool = False):
    """Run a flow against one Prefect API (with `scheduler`, one that starts scheduled
    runs); user errors raised inside it become one line and exit 2."""
    from pucl.flows._server import prefect_api

    try:
        with prefect_api(scheduler):
            return call()
    except PuclError as exc:
        fail(str(exc), exc.exit_code)


def frame_table(frame, title: str) -> Table:
    from pucl.reporting.tables import format_cell

    table = Table(title=title)
    for col in frame.columns:
        table.add_column(str(col), justify="left" if frame[col].dtype == object else "right",
                         overflow="fold")
    for row in frame.itertuples(index=False):
        table.add_row(*(format_cell(v) for v in row))
    return table


def _shown(path: Path) -> str:
    """`path` as the user would type it here: relative to the working directory if below it."""
    for here, there in ((Path.cwd().absolute(), Path(path).absolute()),  # a venv's python
                        (Path.cwd().resolve(), Path(path).resolve())):  # is a symlink
        if there.is_relative_to(here):
            return str(there.relative_to(here)) or "."
    return str(path)


def pucl_command() -> str:
    """How to call this pucl from the user's shell: `pucl` when that is what PATH finds,
    else the script beside this interpreter (a virtual environment not activated, as
    after `make run`), else `python -m pucl.cli`."""
    beside = Path(sys.executable).parent / "pucl"
    found = shutil.which("pucl")
    if found and beside.exists() and Path(found).resolve() == beside.resolve():
        return "pucl"
    if beside.exists():
        return _shown(beside)
    return f"{_shown(Path(sys.executable).absolute())} -m pucl.cli"


def score_hint(directory: Path) -> str:
    """How to score new inputs with the classifier a run wrote under `directory`, as a
    command that runs as printed."""
    return (f"score new inputs with it: {pucl_command()} predict NEW.npz --out scores.csv "
            f"--model {_shown(directory)}")


def split_list(text: str | None) -> list[str]:
    return [v.strip() for v in (text or "").split(",") if v.strip()]
