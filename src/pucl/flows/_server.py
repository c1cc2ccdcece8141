"""One Prefect API for a whole command.

Without a configured `PREFECT_API_URL`, Prefect starts a temporary local server per
process; worker processes (process pool, Dask, served flow runs) would each start their own
and report to a server the parent never sees. So a command starts that temporary server
once and points its settings and its child processes at it.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from pucl.errors import PuclError


class _UserErrorsInOneLine(logging.Filter):
    """Prefect logs a failed task with its traceback; for a user error (bad params, bad
    data, a failed data contract) the message line says everything."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, PuclError):
            record.exc_info = None
            record.exc_text = None
        return True


def quiet_user_errors() -> None:
    """Drop tracebacks of user errors from Prefect's log output (unless PUCL_DEBUG=1)."""
    if os.environ.get("PUCL_DEBUG", "") not in ("", "0"):
        return
    from prefect.logging.configuration import setup_logging

    setup_logging()
    for name in ("", "prefect", "prefect.flow_runs", "prefect.task_runs"):
        for handler in logging.getLogger(name).handlers:
            if not any(isinstance(f, _UserErrorsInOneLine) for f in handler.filters):
                handler.addFilter(_UserErrorsInOneLine())


def _drain_logs() -> None:
    """Send buffered run logs before the temporary server goes away."""
    try:
        from prefect.logging.handlers import APILogWorker

        APILogWorker.drain_all(timeout=10)
    except Exception:  # nothing buffered, or the worker never started
        pass


@contextmanager
def prefect_api() -> Iterator[str]:
    """Yield the API URL in use: the configured one, else a temporary local server's."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    quiet_user_errors()
    configured = PREFECT_API_URL.value()
    if configured:
        yield configured
        return
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer()  # the instance Prefect's ephemeral client would use
    server.start()
    reaper = _watch_for_death(server.server_process.pid)
    os.environ["PREFECT_API_URL"] = server.api_url
    try:
        with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
            yield server.api_url
    finally:
        _drain_logs()
        os.environ.pop("PREFECT_API_URL", None)
        reaper.kill()  # this exit stops the server itself
        reaper.wait()
        server.stop()


def _watch_for_death(server_pid: int) -> subprocess.Popen:
    """Start the watcher that stops the server if this process is killed before its
    clean-up runs (`pucl.flows._reaper`). Its stdin is a pipe only this process writes
    to, so the pipe closes exactly when this process ends."""
    return subprocess.Popen([sys.executable, "-m", "pucl.flows._reaper", str(server_pid)],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            close_fds=True)
