"""MLflow runs whose Prefect flow run has ended without them.

A worker killed with its machine (SIGKILL, a power cut, an evicted container) cannot
close its runs: the pipeline's parent and stage runs stay RUNNING in the shared MLflow
store. On the worker's own machine the next command closes them, since it can see that
their process is gone (`tracking.Store.reap_orphans`); on any other machine nothing can
tell a dead run from a live one, except Prefect. With heartbeats on (prefect.yaml sets
PREFECT_FLOWS_HEARTBEAT_FREQUENCY for pucl's deployments) and the automation of
prefect-automations.yaml, the Prefect server marks a flow run CRASHED once its beats stop.
At its start each pucl flow closes the RUNNING runs whose flow run is in a final state:
KILLED, tagged `orphan=true` with the reason, child runs included (docs/gpu.md).
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from prefect import runtime

from pucl import tracking

FLOW_RUN_TAG = "prefect_flow_run_id"  # on each flow's MLflow run: which flow run it is


def flow_run_id() -> str:
    """The current Prefect flow run's id ("" outside a flow run)."""
    try:
        return str(runtime.flow_run.id or "")
    except Exception:
        return ""


def close_what_crashed_workers_left(params: Any, root: Any, logger: Any) -> None:
    """`close_runs_of_ended_flow_runs` on the project's store (none with tracking off).
    Housekeeping: a failure is one warning, never the flow's end."""
    store = tracking.try_open_store(tracking.resolve_tracking_uri(params.tracking.uri, root),
                                    params.tracking.experiment, root)
    if store is None:
        return
    try:
        close_runs_of_ended_flow_runs(store, logger)
    except Exception as exc:
        logger.warning("could not check for runs that crashed workers left RUNNING: %s",
                       tracking.first_line(exc))


def close_runs_of_ended_flow_runs(store: tracking.Store, logger: Any = None) -> list[str]:
    """Close the store's RUNNING runs whose Prefect flow run (FLOW_RUN_TAG) has ended:
    COMPLETED, FAILED, CANCELLED or CRASHED, as the Prefect server says. Runs of flow runs
    still going, or unknown to this server, are left alone. Returns the ids closed."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    running = [run for run in store.runs("attributes.status = 'RUNNING'")
               if run.tags.get(FLOW_RUN_TAG)]
    ours, closed = flow_run_id(), []
    if not running:
        return closed
    with get_client(sync_client=True) as client:
        for run in running:
            flow_run = run.tags[FLOW_RUN_TAG]
            if flow_run == ours:
                continue
            try:
                state = client.read_flow_run(UUID(flow_run)).state
            except (ObjectNotFound, ValueError):  # another server's, or not an id
                continue
            if state is None or not state.is_final():
                continue
            reason = f"its Prefect flow run {flow_run} ended {state.type.value}"
            closed += store.close_left_running(run.run_id, reason)
            if logger is not None:
                logger.warning("closed MLflow run %s and its RUNNING children as KILLED: %s",
                               run.run_id, reason)
    return closed
