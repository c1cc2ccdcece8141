"""The `pucl` command line: one Typer app, its commands grouped by purpose.

- `pipeline`: repro, run, check, methods, ui;
- `experiments`: sweep, bench, ablate, compare;
- `production`: data (init, add, status, reestimate-prior), retrain, predict;
- `schedule`: serve.
"""

from pucl.cli import pipeline  # noqa: F401, I001  (registers commands; help lists them in this order)
from pucl.cli import experiments, production, schedule  # noqa: F401, E402
from pucl.cli._common import app

__all__ = ["app"]
