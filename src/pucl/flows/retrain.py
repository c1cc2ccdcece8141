"""Scheduled retraining: run the pipeline, register the new classifier in the MLflow model
registry, and move the `champion` alias to it only when its test metric beats the
champion's.

`pucl serve --cron "0 2 * * *"` serves this flow on a cron schedule (`flow.serve`);
`prefect.yaml` deploys it to a work pool instead (e.g. GPU workers).
"""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from pucl import tracking
from pucl.flows._tasks import project_dir
from pucl.flows.pipeline import pipeline
from pucl.stages.runner import resolve_params

CHAMPION = "champion"


def should_promote(challenger: float, champion: float | None, min_improvement: float) -> bool:
    """Strictly better than the champion by more than the margin (no champion: promote)."""
    return champion is None or challenger > champion + min_improvement


def _champion_value(store: tracking.Store, version: Any, metric: str) -> float | None:
    """The champion's metric: from its version tag, else from the run that logged it."""
    if version is None:
        return None
    if metric in version.tags:
        return float(version.tags[metric])
    if version.run_id:
        value = store.get(version.run_id).metrics.get(metric)
        return None if value is None else float(value)
    return None


@task(name="promote", cache_policy=NO_CACHE)
def promote(outcome: dict[str, Any], overrides: dict[str, Any] | None,
            project: str | None) -> dict[str, Any]:
    """Register the run's classifier and move the champion alias on improvement."""
    logger = get_run_logger()
    root = project_dir(project)
    params = resolve_params(root, overrides)
    t = params.tracking
    uri = tracking.resolve_tracking_uri(t.uri, root)
    store = tracking.try_open_store(uri, t.experiment, root)
    parent_id = outcome.get("mlflow_run_id")
    if store is None or not parent_id:
        logger.warning("MLflow is unavailable: the classifier was not registered")
        return {"decision": "not_registered"}
    evaluated = [r for r in store.children(parent_id) if r.tags.get("stage") == "evaluate"]
    model_id = evaluated[0].tags.get("model_id") if evaluated else None
    if not model_id:
        logger.warning("the evaluate run logged no model: nothing to register")
        return {"decision": "not_registered"}
    value = float(outcome["metrics"][t.champion_metric])
    version = store.register_model(
        t.registered_model, model_id, evaluated[0].run_id,
        {t.champion_metric: value, "dataset": params.data.dataset, "task": params.data.task,
         "pipeline_run_id": parent_id})
    current = store.version_for_alias(t.registered_model, CHAMPION)
    champion_value = _champion_value(store, current, t.champion_metric)
    promoted = should_promote(value, champion_value, t.min_improvement)
    if promoted:
        store.set_alias(t.registered_model, CHAMPION, version)
    decision = {
        "decision": "promoted" if promoted else "kept",
        "registered_model": t.registered_model, "version": version,
        "metric": t.champion_metric, "challenger": value,
        "champion_before": champion_value,
        "champion_version": version if promoted else (current.version if current else None),
    }
    store.attach(parent_id).set_tags({f"champion.{k}": v for k, v in decision.items()})
    logger.info(
        f"{t.registered_model} v{version}: {t.champion_metric} {value:.4f} vs champion "
        f"{'none' if champion_value is None else f'{champion_value:.4f}'} -> "
        f"{decision['decision']}")
    return decision


@flow(name="pucl-retrain", description="Retrain on the current params and data; promote the "
      "new classifier to the MLflow 'champion' alias only when it is better")
def retrain(overrides: dict[str, Any] | None = None, project: str | None = None,
            progress: bool = False) -> dict[str, Any]:
    outcome = pipeline(overrides=overrides, project=project, progress=progress,
                       name_prefix="retrain")
    return {**outcome, "champion": promote(outcome, overrides, project)}
