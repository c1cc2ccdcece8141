"""The environment pucl sets for the libraries it drives: their usage telemetry off,
idle OpenMP threads that sleep instead of spinning (so parallel points share the cores),
and MLflow's loading of pickles off (so a model someone logged cannot run code here).

The one list of these variables; every entry point (the CLI, the stages, the flows, the
tests) applies it with `quiet_defaults()`, and passes it on to the processes it starts.
A default the user set already is never overridden; a safety setting always holds.
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
# With pickles off, MLflow refuses pickled models and checks a torch.export archive for
# pickled records before loading it (pucl.tracking.models refuses the rest).
SAFETY: dict[str, str] = {
    "MLFLOW_ALLOW_PICKLE_DESERIALIZATION": "false",
}


def quiet_defaults(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Apply QUIET_DEFAULTS (where unset) and SAFETY (always) to os.environ, or return
    `env` with them."""
    if env is None:
        for key, value in QUIET_DEFAULTS.items():
            os.environ.setdefault(key, value)
        os.environ.update(SAFETY)
        return dict(os.environ)
    return {**QUIET_DEFAULTS, **env, **SAFETY}
