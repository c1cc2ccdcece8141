"""Grouping the stage runs of one `dvc repro` under one parent run: DVC starts each stage
as its own process, so the stages find their common parent by the DVC process's id."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pucl.tracking.runs import Run
from pucl.tracking.store import OWNER_TAG, Store, process_id


def dvc_invocation() -> str | None:
    """An id of the `dvc repro` / `dvc exp run` process this stage runs under (None when
    started otherwise), so that the stages of one invocation share one parent run."""
    try:
        import psutil

        for proc in psutil.Process().parents():
            args = proc.cmdline()
            is_dvc = any(a == "dvc" or a.endswith("/dvc") for a in args[:3])
            if is_dvc and any(a in ("repro", "exp") for a in args[1:5]):
                return process_id(proc.pid)
    except Exception:  # no psutil, no /proc, process gone: just no grouping
        return None
    return None


def invocation_parent(store: Store, invocation: str, name: str, tags: Mapping[str, Any],
                      params: Mapping[str, Any]) -> Run:
    """The parent run of one DVC invocation: found by its tag, created by its first stage."""
    found = store.runs(f"tags.pucl_invocation = '{invocation}'")
    if found:
        return store.attach(found[0].run_id)
    # owned by the DVC process: it lives while the stages, each a process, come and go
    run = store.start_run(name, {**tags, "pucl_invocation": invocation,
                                 OWNER_TAG: invocation}, None)
    run.log_params(params)
    return run
