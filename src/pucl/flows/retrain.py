"""Scheduled retraining: one pass trains a challenger when data, params or code changed
since the champion was trained, scores champion and challenger on the same frozen
holdout, and moves the MLflow `champion` alias only when the challenger is better by more
than `tracking.min_improvement`: on a PU holdout, when the paired difference's whole
interval clears it.

Data with P and U alone has a PU holdout (held-out labelled positives and unlabeled rows,
with U's prior frozen beside them): both models are then scored by the label-free
estimate (`pucl.evaluation.label_free`) with that same prior. Where every holdout label is
known, the labelled score decides and the estimate is recorded beside it.

`pucl retrain` runs one pass now; `pucl serve --cron "0 2 * * *"` serves the same flow on
a schedule; `prefect.yaml` deploys it to a work pool. docs/production.md walks through a
cycle. Everything one pass decides is written to its MLflow run (`kind=retrain`) as
`retrain.*` tags; the pipeline run of the challenger is nested under it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from prefect import flow, get_run_logger

import pucl
from pucl import tracking
from pucl.data import get_task
from pucl.data.split import unlabeled_rows
from pucl.data.tracked import Holdout, batch_files, read_batch, read_holdout
from pucl.errors import DataError, PuclError
from pucl.evaluation.label_free import estimate_metrics
from pucl.evaluation.metrics import classification_metrics
from pucl.evaluation.paired import Difference, paired_difference
from pucl.flows._crashed import FLOW_RUN_TAG, close_runs_of_ended_flow_runs, flow_run_id
from pucl.flows._tasks import prefect_stage_call, project_dir
from pucl.params.config import Params
from pucl.params.dataset import dataset_of
from pucl.production.datastore import (
    data_identity,
    discard_interrupted_add,
    estimate_prior,
    exclusive,
    holdout_digest,
)
from pucl.production.serving import score
from pucl.recipe.prior import error_allowed
from pucl.stages.runner import default_run_name, resolve_params, run_directory, run_pipeline
from pucl.validation import ValidationFailed

CHAMPION = tracking.CHAMPION


def should_promote(challenger: float, champion: float | None, min_improvement: float) -> bool:
    """Strictly better than the champion by more than the margin (no champion: promote)."""
    return champion is None or challenger > champion + min_improvement


@dataclass
class Decision:
    decision: str  # promoted | kept | skipped
    reason: str
    holdout_sha256: str
    metric: str
    score_kind: str = "labelled"  # labelled | estimated: the scores that decide
    champion_score: float | None = None
    challenger_score: float | None = None
    champion_estimated: float | None = None  # the label-free estimate, where both exist
    challenger_estimated: float | None = None
    # on a PU holdout: challenger - champion estimated accuracy, paired, with its interval
    difference: float | None = None
    difference_low: float | None = None
    difference_high: float | None = None
    champion_version: str | None = None  # the champion after this pass
    challenger_version: str | None = None
    prior_estimate: float | None = None  # U's prior, all data (the challenger's estimate)
    prior_drift: float | None = None  # ... minus the champion's
    new_rows: int | None = None  # unlabeled rows that arrived since the champion's data
    new_data_prior: float | None = None  # their prior, estimated on its own
    new_data_drift: float | None = None  # ... minus the champion's U prior
    fingerprint: str = ""
    pipeline_run_id: str | None = None  # the challenger's pipeline run
    run_id: str | None = None

    def tags(self) -> dict[str, str]:
        return {f"retrain.{k}": "none" if v is None else str(v)
                for k, v in asdict(self).items() if k != "run_id"}


# -- what the champion was trained on ---------------------------------------------------

def code_digest() -> str:
    """sha256 of the installed pucl sources (what a retrain would run)."""
    h = hashlib.sha256()
    package = Path(pucl.__file__).parent
    for file in sorted(package.rglob("*.py")):
        h.update(str(file.relative_to(package)).encode())
        h.update(file.read_bytes())
    return h.hexdigest()


def params_digest(params: Params) -> str:
    """The params that shape the model (not where outputs go or how runs are tracked)."""
    shaping = params.model_dump(mode="json", exclude={"paths", "tracking"})
    return hashlib.sha256(json.dumps(shaping, sort_keys=True).encode()).hexdigest()


def fingerprint(params: Params, root: Path, data_digest: str | None = None
                ) -> dict[str, str]:
    """Hashes of what trains a model; pass `data_digest` when it is already known."""
    data = data_digest or data_identity(params, root)[1]
    parts = {"data": data, "params": params_digest(params), "code": code_digest()}
    parts["all"] = hashlib.sha256("|".join(parts.values()).encode()).hexdigest()
    return parts


# -- the frozen holdout -----------------------------------------------------------------

def holdout(params: Params, root: Path) -> Holdout:
    """The rows (float inputs) the champion and challenger are both scored on: the tracked
    dataset's frozen holdout, else the dataset's test split (fixed by data.seed)."""
    from pucl.data.augment import unit_scale

    d = params.data
    if d.dataset == "tracked":
        frozen = read_holdout(root / params.paths.dataset)
        return replace(frozen, x=unit_scale(frozen.x).astype(np.float32))
    data = dataset_of(params, root)
    task = get_task(d.task)
    keep = np.flatnonzero(task.keep(data.y_test))
    if not len(keep):  # P and U alone: only a tracked dataset freezes a PU holdout
        raise DataError(f"data.dataset = {d.dataset!r} has no labelled test rows to score "
                        f"champion and challenger on (allowed: data with x_test and "
                        f"y_test, or data.dataset: tracked, whose `pucl data init` freezes "
                        f"a PU holdout from P and U alone)")
    return Holdout(unit_scale(data.x_test[keep]).astype(np.float32),
                   task.binarize(data.y_test[keep]).astype(np.int64))


def holdout_sha256(hold: Holdout) -> str:
    """The digest recorded with every score (a labelled holdout's as before PU holdouts)."""
    if hold.pu is None:
        return holdout_digest(hold.x, hold.y)
    return holdout_digest(hold.x, hold.y, hold.pu, np.float64(hold.prior))


@dataclass(frozen=True)
class HoldoutScore:
    """A model's score on the holdout: `labelled` where every label is known, `estimated`
    (label-free, from held-out P, U and the frozen prior) on a PU holdout, and the
    estimated accuracy with its interval, whatever the metric; `scores`: the model's
    P(y = 1) of each holdout row, for the paired difference."""

    labelled: float | None
    estimated: float | None
    estimated_accuracy: float | None
    scores: np.ndarray | None = None
    estimated_interval: tuple[float, float] | None = None

    @property
    def deciding(self) -> float:
        return self.labelled if self.labelled is not None else self.estimated


def score_holdout(scores: np.ndarray, hold: Holdout, metric: str, scenario: str,
                  prior_error: float = 0.0, seed: int = 0) -> HoldoutScore:
    """`scores` (P(y = 1) per holdout row) as HoldoutScore. U of a PU holdout is every row
    under case_control, the rows not labelled under single_dataset."""
    labelled = classification_metrics(hold.y, scores)[metric] if hold.labelled else None
    if hold.pu is None:
        return HoldoutScore(labelled, None, None, scores)
    in_u = unlabeled_rows(hold.pu == 1, scenario)
    est = estimate_metrics(scores[hold.pu == 1], scores[in_u], hold.prior,
                           prior_error=prior_error, seed=seed)
    return HoldoutScore(labelled, est[metric].value, est["accuracy"].value, scores,
                        est["accuracy"].interval())


def paired_on_holdout(challenger: np.ndarray, champion: np.ndarray, hold: Holdout,
                      scenario: str, prior_error: float = 0.0, seed: int = 0) -> Difference:
    """The challenger's estimated accuracy minus the champion's, on the PU holdout's same
    P and U rows with its frozen prior, with a paired bootstrap interval widened by the
    prior's part (pucl.evaluation.paired)."""
    labelled = hold.pu == 1
    in_u = unlabeled_rows(labelled, scenario)
    return paired_difference(challenger[labelled], challenger[in_u], champion[labelled],
                             champion[in_u], hold.prior, seed=seed, prior_error=prior_error)


def arrived_prior(params: Params, root: Path, since_batches: int
                  ) -> tuple[int, float | None]:
    """(rows, prior) of the rows of U (as `split.scenario` defines it) in the tracked
    dataset's batches added after the first `since_batches`, by `prior.method`'s estimator
    against every labelled positive; prior None when there is nothing new or too little
    for the estimator."""
    from pucl.prior import PRIOR_ESTIMATORS

    files = batch_files(root / params.paths.dataset)
    method = params.prior.method
    if since_batches >= len(files) or method not in PRIOR_ESTIMATORS:
        return 0, None
    batches = [read_batch(f) for f in files]
    positive = np.concatenate([b.x[b.pu == 1] for b in batches])
    # U as the split defines it, so that the estimate compares with the champion's
    # (case_control: every row; single_dataset: the rows not labelled)
    in_u = [unlabeled_rows(b.pu == 1, params.split.scenario) for b in batches[since_batches:]]
    arrived = np.concatenate([b.x[m] for b, m in zip(batches[since_batches:], in_u,
                                                       strict=True)])
    return len(arrived), estimate_prior(params, arrived, positive)


def holdout_prior_error(params: Params, hold: Holdout) -> float:
    """The prior error the holdout's intervals cover: evaluate.prior_error, or the frozen
    prior's own half-width where that is wider."""
    return error_allowed(params.evaluate.prior_error, hold.prior_halfwidth)


def holdout_score(store: tracking.Store, name: str, version: str, hold: Holdout,
                  params: Params) -> HoldoutScore:
    model = tracking.load_version(store.uri, name, version)
    return score_holdout(score(model, hold.x, what=f"{name} v{version}"), hold,
                         params.tracking.champion_metric, params.split.scenario,
                         holdout_prior_error(params, hold), params.base.seed)


# -- one pass ---------------------------------------------------------------------------

def open_registry_store(params: Params, root: Path) -> tracking.Store:
    """The store, or one line: retraining needs its model registry (no silent skip)."""
    uri = tracking.resolve_tracking_uri(params.tracking.uri, root)
    try:
        store = tracking.open_store(uri, params.tracking.experiment, root)
        store.client.search_registered_models(max_results=1)
    except Exception as exc:
        raise tracking.StoreUnavailable(
            f"MLflow store {uri} cannot be used ({tracking.first_line(exc)}); retraining "
            "needs its model registry") from None
    return store


def _figures(store: tracking.Store, run: tracking.Run, name: str, workdir: Path) -> None:
    """The champion's holdout score over model versions, the prior estimate over data
    versions: from the registered versions' tags; and, once batches were watched, the
    champion's estimate and U's prior on each (the data runs' monitor.* metrics)."""
    from pucl.io import save_figure
    from pucl.reporting.tables import monitor_figure, retrain_history_figures

    figures = retrain_history_figures(store.versions(name))
    watched = watched_batches(store)
    if watched:
        figures["monitor_by_batch.png"] = monitor_figure(watched)
    for filename, fig in figures.items():
        path = workdir / filename
        save_figure(path, fig)
        run.log_artifact(path, "figures")


def watched_batches(store: tracking.Store) -> list[dict[str, Any]]:
    """One row per watched batch (a data run with monitor.* metrics), by batch id."""
    rows = {}
    for r in store.runs("tags.kind = 'data'"):
        m = r.metrics
        if "monitor.estimated_accuracy" not in m:
            continue
        batch = r.tags.get("data.batch", "?")
        rows[batch] = {"batch": batch, "prior": m.get("monitor.prior", np.nan),
                       "estimated_accuracy": m["monitor.estimated_accuracy"],
                       "low": m["monitor.estimated_accuracy_low"],
                       "high": m["monitor.estimated_accuracy_high"],
                       "reference": m.get("monitor.reference_accuracy", np.nan),
                       "alert": r.tags.get("monitor.alert")}
    return [rows[k] for k in sorted(rows)]


ORPHAN_TAG = "retrain.orphan"


def mark_orphans(store: tracking.Store, name: str, logger: Any | None = None) -> list[str]:
    """What an earlier pass left when it was killed. It held the retrain lock this pass
    holds now, so nothing still writes to it: its retrain run and the runs nested under it
    that are still RUNNING are marked FAILED, and a version it registered but never scored
    (no `holdout_score`) and that holds no alias is tagged `retrain.orphan=true`, so that
    no one takes it for a candidate. Returns one line per thing marked, each also logged
    as a warning to `logger`."""
    marked = []

    def fail(run: tracking.RunRecord) -> None:
        for child in store.children(run.run_id):
            if child.status == "RUNNING":
                fail(child)
        handle = store.attach(run.run_id)
        handle.set_tags({ORPHAN_TAG: "true"})
        handle.finish("FAILED")

    for run in store.runs("tags.kind = 'retrain' and attributes.status = 'RUNNING'"):
        fail(run)
        marked.append(f"run {run.name} ({run.run_id}) marked FAILED")
    registered = {m.name for m in store.client.search_registered_models(f"name = '{name}'")}
    for version in store.versions(name) if name in registered else []:
        tags = version["tags"]
        if "holdout_score" in tags or version["aliases"] or tags.get(ORPHAN_TAG) == "true":
            continue
        store.set_version_tag(name, str(version["version"]), ORPHAN_TAG, "true")
        marked.append(f"version {version['version']} of {name} (never scored) tagged "
                      f"{ORPHAN_TAG}")
    for line in marked if logger is not None else ():
        logger.warning(f"retrain: an earlier pass was killed: {line}")
    return marked


def _clear_what_kills_left(store: tracking.Store, params: Params, root: Path, logger) -> None:
    """The runs a killed earlier pass left RUNNING, and the batch files a killed `pucl
    data add` left unrecorded."""
    close_runs_of_ended_flow_runs(store, logger)
    mark_orphans(store, params.tracking.registered_model, logger)
    if params.data.dataset == "tracked":
        for file in discard_interrupted_add(root, root / params.paths.dataset):
            logger.warning("removed %s: written by an interrupted pucl data add, never "
                           "recorded with DVC", file)


def _register_challenger(store: tracking.Store, params: Params, root: Path, result,
                         tags: dict) -> str:
    """The model the challenger's evaluate run logged, registered with `tags` and the
    data it learned from; its version."""
    evaluated = [r for r in store.children(result.mlflow_run_id)
                 if r.tags.get("stage") == "evaluate"]
    model_id = evaluated[0].tags.get("model_id") if evaluated else None
    if not model_id:
        raise tracking.StoreUnavailable("the challenger's evaluate run logged no model, so it "
                                        "cannot be registered; see its MLflow run")
    return store.register_model(params.tracking.registered_model, model_id,
                                evaluated[0].run_id, {
        **tags, "dataset": params.data.dataset, "task": params.data.task,
        "data.batches": len(batch_files(root / params.paths.dataset))
        if params.data.dataset == "tracked" else "none",
        "pipeline_run_id": result.mlflow_run_id})


def retrain_once(params: Params, root: Path, progress: bool) -> Decision:
    logger = get_run_logger()
    t = params.tracking
    store = open_registry_store(params, root)
    _clear_what_kills_left(store, params, root, logger)
    hold = holdout(params, root)
    sha = holdout_sha256(hold)
    data_name, data_digest, data_source = data_identity(params, root)
    prints = fingerprint(params, root, data_digest)
    champion = store.version_for_alias(t.registered_model, CHAMPION)
    decision = Decision("skipped", "", sha, t.champion_metric,
                        "labelled" if hold.labelled else "estimated",
                        fingerprint=prints["all"],
                        champion_version=champion.version if champion else None)
    name = default_run_name(params, "retrain")
    with tracking.run_in(store, name, root, {"kind": "retrain", FLOW_RUN_TAG: flow_run_id(),
                                             "dataset": params.data.dataset,
                                             "task": params.data.task,
                                             "data.version": data_digest[:16]}) as run:
        decision.run_id = run.run_id
        run.log_dataset(data_name, data_digest, data_source)
        unchanged = _unchanged_since(store, t.registered_model, champion, prints["all"])
        if unchanged is not None:
            decision.reason = unchanged
            decision.champion_score = _float(champion.tags.get("holdout_score"))
            _record(run, decision, logger, hold,
                    _float(champion.tags.get("holdout_estimated_accuracy")))
            return decision
        workdir = run_directory(root, params, name)
        try:
            result = run_pipeline(params, workdir, name.replace("retrain", "challenger", 1),
                                  tags={"retrain_run_id": run.run_id}, progress=progress,
                                  entry="retrain", parent_run_id=run.run_id,
                                  stage_call=prefect_stage_call)
        except ValidationFailed as exc:  # a failed data gate: train nothing, move nothing
            decision.decision, decision.reason = "kept", f"data contract failed: {exc}"
            _record(run, decision, logger, hold, _float(champion.tags.get(
                "holdout_estimated_accuracy")) if champion is not None else None)
            return decision
        decision.pipeline_run_id = result.mlflow_run_id
        decision.prior_estimate = _float(result.metrics.get("prior_estimate"))
        decision.challenger_version = _register_challenger(store, params, root, result, {
            "retrain.fingerprint": prints["all"], "holdout_sha256": sha,
            "data.version": data_digest[:16], "prior_estimate": decision.prior_estimate,
            "retrain_run_id": run.run_id})
        challenger = _score_challenger(decision, store, params, hold)
        champion_held = (_against_champion(decision, champion, store, params, root, hold)
                         if champion is not None else None)
        promote = _decide(decision, store, params, champion, challenger, champion_held, hold)
        holder = challenger if promote else champion_held
        _record(run, decision, logger, hold,
                holder.estimated_accuracy if holder is not None else None,
                holder.estimated_interval if holder is not None else None)
        _figures(store, run, t.registered_model, workdir)
        return decision


def _score_challenger(decision: Decision, store: tracking.Store, params: Params,
                      hold: Holdout) -> HoldoutScore:
    """The challenger's score into `decision` and onto its version's tags."""
    name, version = params.tracking.registered_model, decision.challenger_version
    challenger = holdout_score(store, name, version, hold, params)
    decision.challenger_score = challenger.deciding
    if challenger.labelled is not None:  # else the estimate is the score already
        decision.challenger_estimated = challenger.estimated
    for key, value in (("holdout_score", challenger.deciding),
                       ("holdout_score_kind", decision.score_kind),
                       ("holdout_estimated_accuracy", challenger.estimated_accuracy)):
        if value is not None:
            store.set_version_tag(name, version, key, value)
    return challenger


def _decide(decision: Decision, store: tracking.Store, params: Params, champion: Any,
            challenger: HoldoutScore, held: HoldoutScore | None, hold: Holdout) -> bool:
    """Move the alias to the challenger (True) or keep the champion. On a PU holdout
    judged by accuracy: the paired difference's whole interval must clear the margin
    (a tie keeps the champion). Elsewhere, the margin rule on the two scores."""
    t = params.tracking
    paired = (hold.pu is not None and not hold.labelled and t.champion_metric == "accuracy"
              and held is not None and held.scores is not None)
    if paired:
        diff = paired_on_holdout(challenger.scores, held.scores, hold, params.split.scenario,
                                 holdout_prior_error(params, hold), params.base.seed)
        decision.difference, decision.difference_low, decision.difference_high = (
            diff.value, diff.low, diff.high)
        promote = diff.verdict(t.min_improvement) == "a"
        shown = (f"challenger - champion = {diff.value:+.4f} [{diff.low:+.4f}, "
                 f"{diff.high:+.4f}] (paired, on the holdout's P and U)")
        decision.reason += (f"{shown}: the interval clears {t.min_improvement:g}" if promote
                            else f"{shown}: the interval does not clear "
                            f"{t.min_improvement:g}")
    else:
        promote = should_promote(decision.challenger_score, decision.champion_score,
                                 t.min_improvement)
        decision.reason += (
            "no champion yet" if champion is None else
            f"challenger {decision.challenger_score:.4f} "
            f"{'>' if promote else '<='} champion {_show(decision.champion_score)} "
            f"+ {t.min_improvement:g}")
    if promote:
        store.set_alias(t.registered_model, CHAMPION, decision.challenger_version)
        decision.decision = "promoted"
        decision.champion_version = decision.challenger_version
        return True
    decision.decision = "kept"
    return False


def _against_champion(decision: Decision, champion: Any, store: tracking.Store,
                      params: Params, root: Path, hold: Holdout) -> HoldoutScore | None:
    """The champion's score on the same holdout, and how the prior moved since it was
    trained (overall, and on the batches that arrived since), into `decision`; returns
    the score (None when the champion cannot score this holdout)."""
    t = params.tracking
    previous = _float(champion.tags.get("prior_estimate"))
    if previous is not None and decision.prior_estimate is not None:
        decision.prior_drift = decision.prior_estimate - previous
    since = champion.tags.get("data.batches", "none")
    if params.data.dataset == "tracked" and since.isdigit():
        decision.new_rows, decision.new_data_prior = arrived_prior(params, root, int(since))
        if previous is not None and decision.new_data_prior is not None:
            decision.new_data_drift = decision.new_data_prior - previous
    try:
        held = holdout_score(store, t.registered_model, champion.version, hold, params)
    except PuclError as exc:  # e.g. trained on inputs of another shape
        decision.reason = f"the champion cannot score this holdout ({exc}); "
        return None
    decision.champion_score = held.deciding
    if held.labelled is not None:
        decision.champion_estimated = held.estimated
    return held


def _float(value: Any) -> float | None:
    try:
        return None if value in (None, "", "none") else float(value)
    except (TypeError, ValueError):
        return None


def _show(value: float | None) -> str:
    return "none" if value is None else f"{value:.4f}"


def _unchanged_since(store: tracking.Store, name: str, champion: Any,
                     fingerprint: str) -> str | None:
    """Why a pass trains nothing (None: it trains): the champion, or a challenger kept
    before, came from the same data, params and code."""
    if champion is None:
        return None
    if champion.tags.get("retrain.fingerprint") == fingerprint:
        return f"data, params and code unchanged since champion v{champion.version} was trained"
    tried = _kept_before(store, name, fingerprint)  # it would lose again
    return (f"data, params and code unchanged since v{tried} was trained and kept"
            if tried is not None else None)


def _kept_before(store: tracking.Store, name: str, fingerprint: str) -> int | None:
    """A version trained from the same data, params and code that a pass scored and kept
    (it lost to the champion of its day), or None. Training is seeded, so training it again
    gives the same model and the same decision: a schedule would retrain the same data on
    every tick until something changed (the soak of reports/reliability did, each minute)."""
    registered = {m.name for m in store.client.search_registered_models(f"name = '{name}'")}
    for version in reversed(store.versions(name) if name in registered else []):
        tags = version["tags"]
        if (tags.get("retrain.fingerprint") == fingerprint and "holdout_score" in tags
                and tags.get(ORPHAN_TAG) != "true"):
            return version["version"]
    return None


def _record(run: tracking.Run, decision: Decision, logger: Any, hold: Holdout,
            estimated_accuracy: float | None,
            interval: tuple[float, float] | None = None) -> None:
    """The decision as retrain.* tags and metrics, with the holdout's frozen prior and the
    estimated accuracy of the model holding the alias after this pass, with its interval
    where this pass scored it (holdout.*)."""
    low, high = interval if interval is not None else (None, None)
    run.set_tags({**decision.tags(), "holdout.prior": _show(hold.prior),
                  "holdout.prior_halfwidth": _show(hold.prior_halfwidth),
                  "holdout.estimated_accuracy": _show(estimated_accuracy),
                  "holdout.estimated_accuracy_low": _show(low),
                  "holdout.estimated_accuracy_high": _show(high)})
    run.log_metrics({f"retrain.{k}": getattr(decision, k) for k in (
        "champion_score", "challenger_score", "champion_estimated", "challenger_estimated",
        "difference", "difference_low", "difference_high",
        "prior_estimate", "prior_drift", "new_rows", "new_data_prior", "new_data_drift")
        if getattr(decision, k) is not None})
    logger.info(f"retrain: {decision.decision} ({decision.reason})")


@flow(name="pucl-retrain", description="Train a challenger when data, params or code "
      "changed; promote it to the MLflow 'champion' alias only when it beats the champion "
      "on the same frozen holdout")
def retrain(overrides: dict[str, Any] | None = None, project: str | None = None,
            progress: bool = False, wait: float = 0.0) -> dict[str, Any]:
    """One pass; returns the decision as plain data. Two passes never run at once on one
    project: the second waits up to `wait` seconds for the first, then refuses."""
    root = project_dir(project)
    params = resolve_params(root, overrides)
    with exclusive(root / params.paths.runs / "retrain.lock", "retrain", wait):
        return asdict(retrain_once(params, root, progress))
