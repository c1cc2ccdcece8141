"""The environment pucl sets for the libraries it drives: their usage telemetry off, and
idle OpenMP threads that sleep instead of spinning (so parallel points share the cores).

The one list of these variables; every entry point (the CLI, the stages, the flows, the
tests) applies it with `quiet_defaults()`, and passes it on to the processes it starts.
A variable the user set already is never overridden.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

QUIET_DEFAULTS: dict[str, str] = {
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DO_NOT_TRACK": "true",
    "GX_ANALYTICS_ENABLED": "false",
    "DVC_NO_ANALYTICS": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "OMP_WAIT_POLICY": "PASSIVE",
}


def quiet_defaults(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Apply QUIET_DEFAULTS to os.environ (or return `env` with them) without overriding."""
    if env is None:
        for key, value in QUIET_DEFAULTS.items():
            os.environ.setdefault(key, value)
        return dict(os.environ)
    return {**QUIET_DEFAULTS, **env}
