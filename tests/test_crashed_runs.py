"""MLflow runs that a dead worker left RUNNING, closed by the next flow when Prefect says
their flow run ended (pucl.flows._crashed): against a real Prefect server and a real
MLflow store, with runs owned by a process of another machine (so that only Prefect can
tell whether they live)."""

from __future__ import annotations

import pytest
from prefect import flow
from prefect.client.orchestration import get_client
from prefect.states import Completed, Crashed, Running

from pucl import tracking
from pucl.flows._crashed import FLOW_RUN_TAG, close_runs_of_ended_flow_runs
from pucl.tracking.store import OWNER_TAG

pytestmark = pytest.mark.filterwarnings("ignore")
ELSEWHERE = "another-machine:4242:1700000000.000"  # a process this machine cannot check


@flow(name="pucl-test-flow")
def nothing() -> None:
    pass


def flow_run_in(state) -> str:
    with get_client(sync_client=True) as client:
        run = client.create_flow_run(nothing)
        client.set_flow_run_state(run.id, state, force=True)
        return str(run.id)


def started(store: tracking.Store, flow_run: str, parent: str | None = None) -> str:
    tags = {OWNER_TAG: ELSEWHERE, **({FLOW_RUN_TAG: flow_run} if parent is None else {})}
    return store.start_run("run", tags, parent).run_id


def test_runs_of_ended_flow_runs_are_closed_with_their_children(harness, tmp_path):
    store = tracking.open_store(f"sqlite:///{tmp_path / 'mlflow.db'}", "pucl", tmp_path)
    crashed, done, running = (flow_run_in(Crashed()), flow_run_in(Completed()),
                              flow_run_in(Running()))
    dead = started(store, crashed)
    dead_stage = started(store, crashed, parent=dead)
    finished_stage = started(store, crashed, parent=dead)
    store.attach(finished_stage).finish("FINISHED")
    stale = started(store, done)
    alive = started(store, running)
    alive_stage = started(store, running, parent=alive)
    unknown = started(store, "00000000-0000-0000-0000-000000000000")
    assert store.reap_orphans() == []  # their owner is on another machine: no verdict

    closed = close_runs_of_ended_flow_runs(store)
    assert sorted(closed) == sorted([dead_stage, dead, stale])
    status = {r.run_id: (r.status, r.tags.get("orphan.reason")) for r in store.runs()}
    assert status[dead] == ("KILLED", f"its Prefect flow run {crashed} ended CRASHED")
    assert status[dead_stage][0] == "KILLED" and status[finished_stage][0] == "FINISHED"
    assert status[stale] == ("KILLED", f"its Prefect flow run {done} ended COMPLETED")
    assert {status[r][0] for r in (alive, alive_stage, unknown)} == {"RUNNING"}
    assert close_runs_of_ended_flow_runs(store) == []  # nothing left to close
