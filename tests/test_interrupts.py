"""A process stopped by SIGTERM unwinds like one stopped by Ctrl-C: its `finally` blocks
run, its MLflow runs end KILLED (not RUNNING for ever), and it exits 143."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest

from pucl.runtime.interrupts import SIGTERM_EXIT_CODE, Terminated, end_on_sigterm, run_status
from pucl.tracking.runs import TRACKING_ENV
from tests.conftest import new_store

# A tracked run that is stopped while its body works.
SCRIPT = """
import sys, time
from pathlib import Path
from pucl import tracking
from pucl.runtime.interrupts import end_on_sigterm
root, uri, handled = Path(sys.argv[1]), sys.argv[2], sys.argv[3] == "handled"
if handled:
    end_on_sigterm()
with tracking.tracked_run("stopped", "interrupts", uri, root) as run:
    try:
        print(run.run_id, flush=True)
        time.sleep(120)
    finally:
        (root / "unwound").touch()
"""


def stop_a_tracked_run(tmp_path, handled: bool) -> tuple[int, str, bool]:
    """Start SCRIPT, SIGTERM it once its run is open: (exit code, run status, unwound)."""
    from mlflow.tracking import MlflowClient

    uri = new_store(tmp_path / "mlflow.db")
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(tmp_path), uri, "handled" if handled else "not"],
        stdout=subprocess.PIPE, text=True, env={**os.environ, TRACKING_ENV: "on"})
    run_id = proc.stdout.readline().strip()
    assert run_id, "the script opened no MLflow run"
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=60)
    status = MlflowClient(uri).get_run(run_id).info.status
    return code, status, (tmp_path / "unwound").exists()


def test_a_stopped_process_closes_its_run_as_killed(tmp_path):
    code, status, unwound = stop_a_tracked_run(tmp_path, handled=True)
    assert (code, status, unwound) == (SIGTERM_EXIT_CODE, "KILLED", True)


def test_without_the_handler_the_run_would_stay_running(tmp_path):
    """What end_on_sigterm is for: Python's default ends the process on the spot."""
    code, status, unwound = stop_a_tracked_run(tmp_path, handled=False)
    assert (code, status, unwound) == (-signal.SIGTERM, "RUNNING", False)


@pytest.mark.parametrize(("exc", "status"), [
    (None, "FINISHED"), (KeyboardInterrupt(), "KILLED"), (Terminated(143), "KILLED"),
    (ValueError("bad"), "FAILED"), (SystemExit(1), "FAILED"),
])
def test_run_status(exc, status):
    assert run_status(exc) == status


def test_a_handler_someone_else_installed_is_left_alone():
    previous = signal.getsignal(signal.SIGTERM)

    def theirs(signum, frame):
        pass

    try:
        signal.signal(signal.SIGTERM, theirs)
        assert end_on_sigterm() is False
        assert signal.getsignal(signal.SIGTERM) is theirs
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_only_the_main_thread_installs_it():
    previous = signal.getsignal(signal.SIGTERM)
    installed = []
    worker = threading.Thread(target=lambda: installed.append(end_on_sigterm()))
    worker.start()
    worker.join()
    assert installed == [False]
    assert signal.getsignal(signal.SIGTERM) is previous
