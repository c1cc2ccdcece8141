"""One Prefect API for a whole command.

Without a configured `PREFECT_API_URL`, Prefect starts a temporary local server per
process; worker processes (process pool, Dask, served flow runs) would each start their own
and report to a server the parent never sees. So a command starts that temporary server
once and points its settings and its child processes at it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager

from pucl.errors import PuclError, debugging
from pucl.flows._reaper import watch

# Seconds a temporary Prefect server may take to answer. Prefect's default (20 s) is too
# short on a busy 2-core machine: CI saw a start take longer while tests ran beside it.
SERVER_STARTUP_TIMEOUT_S = 120


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
    if debugging():
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
    from prefect.settings import PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS

    server = SubprocessASGIServer()  # the instance Prefect's ephemeral client would use
    # A longer timeout set by the user wins; a shorter one (or Prefect's default) doesn't.
    server.start(timeout=max(SERVER_STARTUP_TIMEOUT_S,
                             PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value()))
    reaper = watch(server.server_process.pid)  # stops it if this process is killed
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
