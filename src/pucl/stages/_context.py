"""What a stage's `run(ctx)` receives: its params, where its files are, the data, and a
run to log to. The harness (`pucl.stages._harness`) builds it; stages never open MLflow
themselves, so tracking code is not a dependency of any stage's outputs."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from pucl.data import ImageData, check_task, get_task, load_dataset
from pucl.errors import ParamsError
from pucl.io import read_json, read_table, write_json
from pucl.params.config import Params
from pucl.registry import Entry

if TYPE_CHECKING:
    from pucl.tracking import Run

MANIFEST_COLUMNS = ("index", "split", "pu", "in_u", "y")
# The class prior report under paths.prior (estimate_prior's), read by every later stage.
PRIOR_REPORT = "prior.json"
LABEL_COLUMNS = ("index", "pseudo_label")


def entry_settings(params: Params, section: str, entry: Entry) -> Any:
    """A registry entry's own settings, from its sub-section of `section`."""
    return entry.settings(getattr(params, section).sub_section(entry.params_key),
                          f"{section}.{entry.params_key}")


def data_path(params: Params, root: Path) -> str | None:
    """What the dataset reads: the tracked dataset's directory (`paths.dataset`), or
    data.path (bring-your-own file or folder), resolved against the project root."""
    if params.data.dataset == "tracked":
        return str(root / params.paths.dataset)
    return str(root / params.data.path) if params.data.path else None


@dataclass
class StageContext:
    name: str
    params: Params
    root: Path
    run: Run
    progress: bool = True
    validations: dict = field(default_factory=dict)

    def path(self, section: str, filename: str) -> Path:
        """An input or output file under the directory `paths.<section>`."""
        return (self.root / getattr(self.params.paths, section) / filename).resolve()

    def data(self) -> ImageData:
        p = self.params
        check_task(p.data.dataset, p.data.task)
        return load_dataset(p.data.dataset, root=str(self.root / p.paths.data_root),
                            test_fraction=p.data.test_fraction, seed=p.data.seed,
                            download=p.data.download, path=data_path(p, self.root))

    def task(self):
        return get_task(self.params.data.task)

    def manifest(self) -> pd.DataFrame:
        return read_table(self.path("split", "manifest.parquet"), MANIFEST_COLUMNS)

    def validate(self, build: Callable[[], Any]) -> Any:
        """Run a data-contract suite (`build()` returns its report) when validation is on.
        The full report goes to MLflow; a failed suite stops the stage with one line."""
        if not self.params.validation.enabled:
            return None
        from pucl.validation import enforce

        report = build()
        self.run.log_text(json.dumps(report.to_dict(), indent=2),
                          f"validation/{report.suite}.json")
        self.validations[report.suite] = {"success": report.success,
                                          "evaluated": len(report.results),
                                          "failed": len(report.failures)}
        return enforce(report)

    def write_validation(self, section: str) -> None:
        """The suites' outcome as a DVC metrics file of the stage (empty when off)."""
        write_json(self.path(section, "validation.json"), self.validations)

    def class_prior(self, choice: str | float) -> tuple[float, str]:
        """A prior setting ('estimate', 'oracle' or a number) as (value, source); the
        source says where it came from and is logged as a tag (oracle is never hidden)."""
        if isinstance(choice, float):
            return choice, "given"
        report = self.read_json("prior", PRIOR_REPORT)
        if choice == "oracle":
            if report.get("prior_true") is None:
                raise ParamsError("prior 'oracle' needs the true labels of U, which this "
                                  "data does not have (allowed here: estimate or a number)")
            return float(report["prior_true"]), "oracle"
        return float(report["prior"]), "oracle" if report.get("oracle") else report["method"]

    def settings(self, section: str, entry: Entry) -> Any:
        """A registry entry's own settings, from its sub-section of `section`."""
        return entry_settings(self.params, section, entry)

    def read_json(self, section: str, filename: str) -> dict:
        return read_json(self.path(section, filename))
