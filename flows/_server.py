"""One Prefect API for a whole command.

Without a configured `PREFECT_API_URL`, Prefect starts a temporary local server per
process; worker processes (process pool, Dask, served flow runs) would each start their own
and report to a server the parent never sees. So a command starts that temporary server
once and points its settings and its child processes at it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def prefect_api() -> Iterator[str]:
    """Yield the API URL in use: the configured one, else a temporary local server's."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    configured = PREFECT_API_URL.value()
    if configured:
        yield configured
        return
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer()  # the instance Prefect's ephemeral client would use
    server.start()
    os.environ["PREFECT_API_URL"] = server.api_url
    try:
        with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
            yield server.api_url
    finally:
        os.environ.pop("PREFECT_API_URL", None)
        server.stop()
