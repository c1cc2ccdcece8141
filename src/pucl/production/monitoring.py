"""Watching arriving data: for each batch `pucl data add` appends, U's prior on it and
the champion's label-free estimated accuracy on the batch's own P and U rows, beside what
the champion scored on the frozen holdout; a drop beyond the estimate's interval is an
alert (pucl.evaluation.label_free.drop_alert). Recorded on the data run (docs/production.md)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pucl import tracking
from pucl.data.augment import unit_scale
from pucl.data.split import unlabeled_rows
from pucl.data.tracked import Batch, batch_files, read_batch
from pucl.evaluation.label_free import Estimate, drop_alert, estimate_metrics
from pucl.params.config import Params
from pucl.production.datastore import prior_with_halfwidth
from pucl.production.serving import score
from pucl.recipe.prior import error_allowed

CHAMPION = tracking.CHAMPION


@dataclass(frozen=True)
class BatchWatch:
    prior: float | None  # U's prior on the batch (its U against every labelled positive)
    accuracy: Estimate | None  # the champion's, on the batch's own P and U
    reference: float | None  # the champion's accuracy on the holdout
    champion_version: str | None
    alert: str | None
    prior_halfwidth: float | None = None  # the batch prior's own 95% half-width

    def metrics(self) -> dict[str, float]:
        out = {"monitor.prior": self.prior, "monitor.prior_halfwidth": self.prior_halfwidth,
               "monitor.reference_accuracy": self.reference}
        if self.accuracy is not None:
            low, high = self.accuracy.interval()
            out.update({"monitor.estimated_accuracy": self.accuracy.value,
                        "monitor.estimated_accuracy_low": low,
                        "monitor.estimated_accuracy_high": high})
        return {k: v for k, v in out.items() if v is not None}

    def tags(self) -> dict[str, str]:
        return {"monitor.champion_version": self.champion_version or "none",
                **({"monitor.alert": self.alert} if self.alert else {})}


def holdout_accuracy(tags: dict[str, str], metric: str) -> float | None:
    """The champion's accuracy on the holdout, from its version tags: the estimate on a
    PU holdout, else the labelled score when accuracy is the champion metric."""
    for key in ("holdout_estimated_accuracy",
                *(("holdout_score",) if metric == "accuracy" else ())):
        if tags.get(key) not in (None, "", "none"):
            return float(tags[key])
    return None


def watch_batch(params: Params, root: Path, batch_id: str) -> BatchWatch:
    """The batch `batch_id` of the tracked dataset, watched (nothing is estimated that
    the batch cannot support: no champion, no labelled positive, too few rows)."""
    directory = root / params.paths.dataset
    batches = [read_batch(f) for f in batch_files(directory)]
    batch: Batch = batches[int(batch_id)]
    in_u = unlabeled_rows(batch.pu == 1, params.split.scenario)
    positives = np.concatenate([b.x[b.pu == 1] for b in batches])
    prior, halfwidth = prior_with_halfwidth(params, batch.x[in_u], positives)
    store = tracking.open_store(tracking.resolve_tracking_uri(params.tracking.uri, root),
                                params.tracking.experiment, root)
    name = params.tracking.registered_model
    champion = store.version_for_alias(name, CHAMPION)
    if champion is None or prior is None or not (batch.pu == 1).any():
        return BatchWatch(prior, None, None, champion.version if champion else None, None,
                          halfwidth)
    model = tracking.load_version(store.uri, name, champion.version)
    scores = score(model, unit_scale(batch.x).astype(np.float32),
                   what=f"{name} v{champion.version}")
    # the interval covers the prior's own half-width where it exceeds the stated error
    accuracy = estimate_metrics(scores[batch.pu == 1], scores[in_u], prior,
                                prior_error=error_allowed(params.evaluate.prior_error,
                                                          halfwidth),
                                seed=params.base.seed)["accuracy"]
    reference = holdout_accuracy(champion.tags, params.tracking.champion_metric)
    alert = (drop_alert(accuracy, reference, f"batch {batch_id}, champion "
                        f"v{champion.version}") if reference is not None else None)
    return BatchWatch(prior, accuracy, reference, str(champion.version), alert, halfwidth)
