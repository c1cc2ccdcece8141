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
    from pucl.interrupts import end_on_sigterm

    end_on_sigterm()
    exit_with_parent()
    try:
        pids.put(os.getpid())
        time.sleep(120)
    finally:  # where open MLflow runs are closed as KILLED
        Path(marker).touch()


def _sweep(pids, watched: bool, marker: str | None = None) -> None:
    """Start a worker, then die as a killed sweep does: at once, no clean-up."""
    context = multiprocessing.get_context("spawn")
    if marker is not None:
        context.Process(target=_unwinding_worker, args=(pids, marker)).start()
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


def orphan_after_parent_dies(watched: bool, marker: str | None = None) -> int:
    context = multiprocessing.get_context("spawn")
    pids = context.Manager().Queue()
    sweep = context.Process(target=_sweep, args=(pids, watched, marker))
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


def test_without_the_watch_the_worker_would_live_on():
    """The case the watch is for: the same orphan, unwatched, keeps running."""
    pid = orphan_after_parent_dies(watched=False)
    time.sleep(2)
    try:
        assert alive(pid)
    finally:
        os.kill(pid, 9)
