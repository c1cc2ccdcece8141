"""Independent fits of one stage side by side in worker processes (`base.fit_workers`).

Small networks (LeNet-5 on 28x28 images) use a second core poorly from one process: a
training step on 2 threads runs at most about 1.5 times as fast as on 1, so two fits
one after the other on 2 threads take longer than the same two side by side, each on 1
thread in its own process (F-MNIST-I's two folds: 0.58 of the time; reports/benchmarks.md).
What is independent here: several encoders' pretraining (pucl.stages._pretrain_members),
the cross-fitting folds' heads, the heads of several encoders.

`base.fit_workers` = w with `base.threads` = t and n jobs: p = min(w, n, t) processes of
t // p threads each.
A fit's numbers depend on the threads it runs on (a sum's order), never on which process
runs it or when; params fix both, so the same params give the same results. On a GPU, or
with one worker, every job runs here, one after the other, on the caller's threads.

Jobs send and return arrays, never tensors (`as_arrays`). Workers are spawned (a fresh
interpreter: no forked copy of torch's thread pools), ignore
Ctrl-C (the caller stops them), and end when the process that started them ends, even by
SIGKILL, rather than finish a fit nobody will read.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing.connection import wait
from typing import Any, TypeVar

import numpy as np
import torch
from torch import nn

from pucl.runtime import work
from pucl.runtime.device import limit_threads
from pucl.runtime.progress import EpochBar

T = TypeVar("T")


def plan(jobs: int, workers: int, threads: int, device: torch.device) -> tuple[int, int]:
    """(processes, threads of each) for `jobs` independent fits; 1 process means here."""
    if device.type != "cpu" or workers < 2 or jobs < 2 or threads < 2:
        return 1, threads
    processes = min(workers, jobs, threads)
    return processes, threads // processes


def _start_worker(threads: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the caller's to handle
    limit_threads(threads)
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def end_with_parent() -> None:
        wait([parent.sentinel])  # ready once the parent has ended, however it ended
        os._exit(1)

    threading.Thread(target=end_with_parent, name="pucl-end-with-parent", daemon=True).start()


def _map_leaves(tree: Any, kind: type, convert: Callable[[Any], Any]) -> Any:
    """`tree` with every leaf of `kind` in its dicts, lists and tuples converted."""
    if isinstance(tree, kind):
        return convert(tree)
    if isinstance(tree, dict):
        return {k: _map_leaves(v, kind, convert) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(_map_leaves(v, kind, convert) for v in tree)
    return tree


def as_arrays(tree: Any) -> Any:
    """`tree` with every tensor in its dicts, lists and tuples copied to a numpy array:
    what a job sends to or returns from a worker (`run_jobs`), so that only plain values
    and arrays cross, never a tensor through torch's shared memory."""
    return _map_leaves(tree, torch.Tensor, lambda t: t.detach().cpu().numpy().copy())


def as_tensors(tree: Any) -> Any:
    """The inverse of `as_arrays` for the arrays it made (every numpy array becomes a
    tensor of the same bits)."""
    return _map_leaves(tree, np.ndarray, torch.from_numpy)


def _refuse_tensors(tree: Any) -> None:
    if isinstance(tree, (torch.Tensor, nn.Module)):
        raise TypeError(f"run_jobs sends arrays and plain values, not a {type(tree).__name__}:"
                        " convert it first (as_arrays; a model as its state dict)")
    if isinstance(tree, dict):
        tree = list(tree.values())
    if isinstance(tree, (list, tuple)):
        for item in tree:
            _refuse_tensors(item)


def _call(fn: Callable, args: tuple, count: bool) -> tuple[Any, float]:
    """A job in a worker: its result and, when the caller counts work, its work."""
    if not count:
        return fn(*args), 0.0
    with work.counting() as tally:
        result = fn(*args)
    return result, tally.macs


def _stop(pool: ProcessPoolExecutor) -> None:
    """Cancel what has not started and end what runs: the executor has no public call
    that ends running work before Python 3.14's terminate_workers."""
    running = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in running:
        process.terminate()


def run_jobs(fn: Callable[..., T], jobs: Sequence[tuple], workers: int, threads: int,
             device: torch.device, desc: str = "fits", progress: bool = False) -> list[T]:
    """[fn(*job) for job in jobs], in order, spread over `plan`'s processes. `fn` must be
    a module-level function; its arguments and results plain values, arrays and
    dataclasses of them, no tensor or module (`as_arrays`: torch's reducers for
    multiprocessing would move every tensor into shared memory, /dev/shm, and let a
    worker write into the caller's tensors). A job's exception is raised here,
    and a worker that died (the kernel's out-of-memory killer, say) fails the call as
    BrokenProcessPool, after the other workers are stopped."""
    processes, each = plan(len(jobs), workers, threads, device)
    if processes == 1:
        return [fn(*job) for job in jobs]
    _refuse_tensors(list(jobs))
    pool = ProcessPoolExecutor(processes, multiprocessing.get_context("spawn"),
                               initializer=_start_worker, initargs=(each,))
    try:
        count = work.is_counting()  # the workers' work joins the caller's tally
        futures = [pool.submit(_call, fn, job, count) for job in jobs]
        bar = EpochBar(len(jobs), f"{desc} ({processes} processes)", disable=not progress,
                       unit="fit")
        for _, future in zip(bar, as_completed(futures), strict=True):
            future.result()  # the first failure, as soon as it happens
        results = []
        for future in futures:
            result, macs = future.result()
            work.add(macs)
            results.append(result)
    except BaseException:
        _stop(pool)  # a failed fit, or Ctrl-C: the others are of no use
        raise
    pool.shutdown()
    return results
