"""The `pucl` command line: one Typer app, its commands grouped by purpose.

- `pipeline`: repro, run, check, methods, ui;
- `experiments`: sweep, bench, ablate, compare;
- `production`: data (init, add, status, reestimate-prior), retrain, predict;
- `schedule`: serve.
"""

from pucl.cli import pipeline  # noqa: F401, I001  (registers commands; help lists them in this order)
from pucl.cli import experiments, production, schedule  # noqa: F401, E402
from pucl.cli._common import app, fail_on_full_disk

__all__ = ["app", "main"]


def main() -> None:
    """The `pucl` command: the app, with a disk that fills up anywhere in a command told
    in one line and exit 2 (every command's own user errors are told where they arise)."""
    with fail_on_full_disk():
        app()
