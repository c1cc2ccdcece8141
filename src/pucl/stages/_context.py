"""What a stage's `run(ctx)` receives: its params, where its files are, the data, and a
run to log to. The harness (`pucl.stages._harness`) builds it; stages never open MLflow
themselves, so tracking code is not a dependency of any stage's outputs."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from pucl.data import ImageData, get_task
from pucl.io import read_json, read_table, write_json
from pucl.params.config import Params
from pucl.params.dataset import dataset_of
from pucl.recipe.prior import Prior, prior_for

if TYPE_CHECKING:
    from pucl.classify.objectives import TrainingRows
    from pucl.tracking import Run

MANIFEST_COLUMNS = ("index", "split", "pu", "in_u", "y")
# The class prior report under paths.prior (estimate_prior's), read by every later stage.
PRIOR_REPORT = "prior.json"
LABEL_COLUMNS = ("index", "pseudo_label")
# train_classifier's out-of-fold scores under paths.classifier, read by evaluate
CROSSFIT_SCORES = "crossfit_scores.parquet"


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

    def directory(self, section: str) -> Path:
        """The directory `paths.<section>`."""
        return (self.root / getattr(self.params.paths, section)).resolve()

    def data(self) -> ImageData:
        return dataset_of(self.params, self.root)

    def task(self):
        return get_task(self.params.data.task)

    def manifest(self) -> pd.DataFrame:
        return read_table(self.path("split", "manifest.parquet"), MANIFEST_COLUMNS)

    def rows(self, part: str) -> pd.DataFrame:
        """The manifest's rows of one part of the split (train, val, test), renumbered."""
        manifest = self.manifest()
        return manifest[manifest["split"] == part].reset_index(drop=True)

    def training_rows(self, pseudo_labels: bool) -> tuple[TrainingRows, np.ndarray]:
        """The classifier's training rows (with PUPL's labels when it reads them), and each
        one's cross-fitting fold (none without split.folds)."""
        from pucl.classify.objectives import TrainingRows  # train_classifier's only

        train = self.manifest().query("split == 'train'")
        pseudo = None
        if pseudo_labels:
            table = read_table(self.path("pupl", "labels.parquet"), LABEL_COLUMNS)
            pseudo = train[["index"]].merge(table, on="index", how="left",
                                            validate="one_to_one")["pseudo_label"].to_numpy()
        fold = train["fold"].to_numpy() if "fold" in train else np.empty(0, np.int64)
        return TrainingRows(train["index"].to_numpy(), train["pu"].to_numpy() == 1,
                            train["in_u"].to_numpy(), pseudo), fold

    def out_of_fold(self) -> tuple[pd.DataFrame, np.ndarray]:
        """With split.folds: the training rows and each one's score by the classifier
        fitted without its fold (train_classifier's crossfit_scores); else no rows."""
        scored = read_table(self.path("classifier", CROSSFIT_SCORES), ("index", "score"))
        rows = self.rows("train").merge(scored[["index", "score"]], on="index",
                                        validate="one_to_one")
        return rows.drop(columns="score"), rows["score"].to_numpy()

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
        """A prior setting ('estimate', 'oracle' or a number) as (value, source), from
        estimate_prior's report; the source is logged as a tag (oracle is never hidden)."""
        if not isinstance(choice, str):  # a number needs no report
            return prior_for(choice, Prior(float(choice), "given"))
        report = self.read_json("prior", PRIOR_REPORT)
        resolved = Prior(float(report["prior"]),
                         "oracle" if report.get("oracle") else report["method"])
        return prior_for(choice, resolved, report.get("prior_true"))

    def side_by_side(self) -> dict[str, int]:
        """How a stage's independent fits share the CPU (pucl.runtime.parallel): the
        processes (base.fit_workers) and the threads among them (base.threads)."""
        return {"workers": self.params.base.fit_workers, "threads": self.params.base.threads}

    def read_json(self, section: str, filename: str) -> dict:
        return read_json(self.path(section, filename))
