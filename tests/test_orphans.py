"""A sweep's pool workers end with the process that started them."""

from __future__ import annotations

import multiprocessing
import os
import time


def _worker(pids) -> None:
    from pucl.flows._tasks import exit_with_parent

    exit_with_parent()
    pids.put(os.getpid())
    time.sleep(120)  # a long sweep point


def _sweep(pids, watched: bool) -> None:
    """Start a worker, then die as a killed sweep does: at once, no clean-up."""
    context = multiprocessing.get_context("spawn")
    target = _worker if watched else _sleeper
    context.Process(target=target, args=(pids,)).start()
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


def orphan_after_parent_dies(watched: bool) -> int:
    context = multiprocessing.get_context("spawn")
    pids = context.Manager().Queue()
    sweep = context.Process(target=_sweep, args=(pids, watched))
    sweep.start()
    sweep.join(60)
    return pids.get(timeout=60)


def test_a_worker_ends_when_its_sweep_is_killed():
    pid = orphan_after_parent_dies(watched=True)
    deadline = time.monotonic() + 20
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(pid)


def test_without_the_watch_the_worker_would_live_on():
    """The case the watch is for: the same orphan, unwatched, keeps running."""
    pid = orphan_after_parent_dies(watched=False)
    time.sleep(2)
    try:
        assert alive(pid)
    finally:
        os.kill(pid, 9)
