"""One Prefect API for a whole command.

Without a configured `PREFECT_API_URL`, Prefect starts a temporary local server per
process; worker processes (process pool, Dask, served flow runs) would each start their own
and report to a server the parent never sees. So a command starts that temporary server
once and points its settings and its child processes at it.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator
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
def prefect_api(scheduler: bool = False) -> Iterator[str]:
    """Yield the API URL in use: the configured one, else a temporary local server's.
    Prefect's own temporary server runs none of the server's services, the scheduler
    among them, so no cron schedule would ever start a run: with `scheduler` (pucl serve)
    the temporary server is a whole one, `prefect server start`."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    quiet_user_errors()
    configured = PREFECT_API_URL.value()
    if configured:
        yield configured
        return
    url, pid, stop = _whole_server() if scheduler else _ephemeral_server()
    reaper = watch(pid)  # stops it if this process is killed
    os.environ["PREFECT_API_URL"] = url
    try:
        with temporary_settings(updates={PREFECT_API_URL: url}):
            yield url
    finally:
        _drain_logs()
        _wait_for_children(exclude={pid, reaper.pid})
        os.environ.pop("PREFECT_API_URL", None)
        reaper.kill()  # this exit stops the server itself
        reaper.wait()
        stop()


def _wait_for_children(exclude: set[int], grace: float = 10.0) -> None:
    """Let this process's other children (a served flow run stopped by the same Ctrl-C,
    pool workers) end before their server goes: without it, a flow run still reporting its
    crash retried against the stopped server for good, and pucl serve never exited. What
    still runs after `grace` seconds is terminated, then killed."""
    import psutil

    children = [c for c in psutil.Process().children() if c.pid not in exclude]
    _, alive = psutil.wait_procs(children, timeout=grace)
    for child in alive:
        with contextlib.suppress(psutil.Error):
            child.terminate()
    _, alive = psutil.wait_procs(alive, timeout=10)
    for child in alive:
        with contextlib.suppress(psutil.Error):
            child.kill()


def _startup_timeout() -> float:
    from prefect.settings import PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS

    # A longer timeout set by the user wins; a shorter one (or Prefect's default) doesn't.
    return max(SERVER_STARTUP_TIMEOUT_S, PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value())


# how Prefect's `SubprocessASGIServer` marks the server it starts: no UI, no services
EPHEMERAL_SERVER_ENV = {"PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1",
                        "PREFECT__SERVER_FINAL": "1"}


def ephemeral_server_command(port: int) -> list[str]:
    """Prefect's temporary API server on `port`, as `prefect.server.api.server.
    SubprocessASGIServer` runs it: uvicorn on Prefect's app factory (with
    EPHEMERAL_SERVER_ENV). Started without that class: importing its module only to start
    a process cost every command about 4 s of CPU on a 2-core machine."""
    import importlib.util
    import sys
    from pathlib import Path

    app_dir = Path(importlib.util.find_spec("prefect").origin).parent.parent
    return [sys.executable, "-m", "uvicorn", "--app-dir", str(app_dir), "--factory",
            "prefect.server.api.server:create_app", "--host", "127.0.0.1", "--port",
            str(port), "--log-level", "error", "--lifespan", "on"]


def _ephemeral_server() -> tuple[str, int, Callable[[], None]]:
    """Prefect's temporary API server (no services), with this process's Prefect
    settings, once it answers."""
    from prefect.settings import get_current_settings

    return _start_local_server(
        ephemeral_server_command, "the temporary Prefect server",
        {**get_current_settings().to_environment_variables(exclude_unset=True),
         **EPHEMERAL_SERVER_ENV})


def _whole_server() -> tuple[str, int, Callable[[], None]]:
    """`prefect server start` on a free local port, with its services (no UI, no
    analytics), once it answers."""
    import sys

    return _start_local_server(
        lambda port: [sys.executable, "-m", "prefect", "server", "start", "--host",
                      "127.0.0.1", "--port", str(port), "--no-ui", "--analytics-off",
                      "--log-level", "ERROR"],
        "the Prefect server for the schedule")


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _start_local_server(command_on: Callable[[int], list[str]], what: str,
                        env: dict[str, str] | None = None, attempts: int = 3
                        ) -> tuple[str, int, Callable[[], None]]:
    """Start `command_on(port)`, a Prefect API server, on a free local port; its URL, pid
    and a stop function once it answers. A server that exits before it answers (another
    process took the port in between) is started again on another port."""
    import subprocess
    import time
    import urllib.request

    for _ in range(attempts):
        port = _free_port()
        server = subprocess.Popen(
            command_on(port), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
            # out of the terminal's group: Ctrl-C stops the command first, then the
            # command stops the server (stopped together, pucl serve hung for good
            # cancelling calls to a dead server)
            start_new_session=True)
        url = f"http://127.0.0.1:{port}/api"

        def stop(server: subprocess.Popen = server) -> None:
            server.terminate()
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()

        deadline = time.monotonic() + _startup_timeout()
        while time.monotonic() < deadline and server.poll() is None:
            try:
                urllib.request.urlopen(f"{url}/health", timeout=2).close()
                return url, server.pid, stop
            except OSError:
                time.sleep(0.5)
        exited = server.poll()
        stop()
        if exited is None:  # it ran out of time: another port would not help
            raise PuclError(f"{what} did not answer on {url} within "
                            f"{_startup_timeout():g} s (set PREFECT_API_URL to a running "
                            f"server)")
    raise PuclError(f"{what} exited (code {exited}) before it answered, {attempts} times "
                    f"(set PREFECT_API_URL to a running server)")
