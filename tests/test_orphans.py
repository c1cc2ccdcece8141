"""A sweep's pool workers end with the process that started them."""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path


def _worker(pids) -> None:
    from pucl.flows._tasks import exit_with_parent

    exit_with_parent()
    pids.put(os.getpid())
    time.sleep(120)  # a long sweep point


def _unwinding_worker(pids, marker: str) -> None:
    """A worker whose stage runs under pucl's SIGTERM handler (as every stage does)."""
    from pucl.flows._tasks import exit_with_parent
    from pucl.runtime.interrupts import end_on_sigterm

    end_on_sigterm()
    exit_with_parent()
    try:
        pids.put(os.getpid())
        time.sleep(120)
    finally:  # where open MLflow runs are closed as KILLED
        Path(marker).touch()


def _late_worker(pids, marker: str) -> None:
    """A worker that survives its stopped point (a process pool's loop catches the
    exception) and is handed the next point after the sweep died."""
    from pucl.flows._tasks import exit_with_parent
    from pucl.runtime.interrupts import Terminated, end_on_sigterm

    end_on_sigterm()
    exit_with_parent()  # the first point
    try:
        pids.put(os.getpid())
        time.sleep(120)
    except Terminated:
        pass  # the pool reports the point as failed and takes the next one
    exit_with_parent()  # the next point
    Path(marker).touch()  # it would have run


def _sweep(pids, watched: bool, marker: str | None = None, late: bool = False) -> None:
    """Start a worker, then die as a killed sweep does: at once, no clean-up."""
    context = multiprocessing.get_context("spawn")
    if marker is not None:
        target = _late_worker if late else _unwinding_worker
        context.Process(target=target, args=(pids, marker)).start()
    else:
        context.Process(target=_worker if watched else _sleeper, args=(pids,)).start()
    while pids.empty():  # the worker is up (and, when watched, watching)
        time.sleep(0.05)
    os._exit(0)


def _sleeper(pids) -> None:
    pids.put(os.getpid())
    time.sleep(120)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie awaiting its reaper has ended
        return f.read().split(") ")[1][0] != "Z"


def orphan_after_parent_dies(watched: bool, marker: str | None = None,
                             late: bool = False) -> int:
    context = multiprocessing.get_context("spawn")
    pids = context.Manager().Queue()
    sweep = context.Process(target=_sweep, args=(pids, watched, marker, late))
    sweep.start()
    sweep.join(60)
    return pids.get(timeout=60)


def test_a_worker_ends_when_its_sweep_is_killed():
    pid = orphan_after_parent_dies(watched=True)
    deadline = time.monotonic() + 20
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(pid)


def test_an_orphaned_worker_unwinds_before_it_ends(tmp_path):
    marker = tmp_path / "unwound"
    pid = orphan_after_parent_dies(watched=True, marker=str(marker))
    deadline = time.monotonic() + 20
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(pid)
    assert marker.exists()


def test_a_point_handed_on_after_the_sweep_died_does_not_start(tmp_path):
    marker = tmp_path / "started"
    pid = orphan_after_parent_dies(watched=True, marker=str(marker), late=True)
    deadline = time.monotonic() + 20
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(pid)
    assert not marker.exists()


def test_without_the_watch_the_worker_would_live_on():
    """The case the watch is for: the same orphan, unwatched, keeps running."""
    pid = orphan_after_parent_dies(watched=False)
    time.sleep(2)
    try:
        assert alive(pid)
    finally:
        os.kill(pid, 9)


def _stoppable_worker(pids, stop_marker: str, unwound: str, late: bool) -> None:
    """A pool worker of a sweep that stays alive (its pool waits for it) but stops."""
    from pucl.flows._tasks import exit_with_parent
    from pucl.runtime.interrupts import Terminated, end_on_sigterm

    end_on_sigterm()
    exit_with_parent(stop_marker)
    try:
        pids.put(os.getpid())
        time.sleep(120)
    except Terminated:
        Path(unwound).touch()  # where open MLflow runs are closed as KILLED
        if not late:
            raise
    exit_with_parent(stop_marker)  # the next point the pool hands on
    Path(unwound + ".next").touch()  # it would have run


def stopped_sweep(tmp_path, late: bool) -> tuple[Path, bool]:
    """A sweep that is stopped but stays alive waiting for its worker, as a Prefect flow
    stopped by SIGTERM waits for its process pool: does the worker end on its own?"""
    from pucl.flows.sweep import stop_workers_on_exit

    context = multiprocessing.get_context("spawn")
    pids = context.Manager().Queue()
    marker, unwound = tmp_path / "sweep" / ".stopped", tmp_path / "unwound"
    worker = context.Process(target=_stoppable_worker,
                             args=(pids, str(marker), str(unwound), late))
    try:
        with stop_workers_on_exit(marker):
            worker.start()
            pids.get(timeout=60)
            raise KeyboardInterrupt  # the stop
    except KeyboardInterrupt:
        pass
    worker.join(30)  # the parent waits, alive, as the pool's shutdown does
    ended = not worker.is_alive()
    if not ended:
        worker.kill()
    return unwound, ended


def test_a_stopped_sweep_that_waits_for_its_pool_still_stops_its_worker(tmp_path):
    unwound, ended = stopped_sweep(tmp_path, late=False)
    assert ended and unwound.exists()


def test_a_stopped_sweep_starts_no_further_point(tmp_path):
    unwound, ended = stopped_sweep(tmp_path, late=True)
    assert ended and unwound.exists()
    assert not Path(str(unwound) + ".next").exists()


def test_the_stop_marker_is_left_only_by_a_stop_and_cleared_by_the_next_run(tmp_path):
    from pucl.flows.sweep import stop_workers_on_exit

    marker = tmp_path / "sweep" / ".stopped"
    with stop_workers_on_exit(marker):
        pass
    assert not marker.exists()
    try:
        with stop_workers_on_exit(marker):
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    assert marker.exists()
    with stop_workers_on_exit(marker):  # the sweep run again: its workers must not stop
        assert not marker.exists()
