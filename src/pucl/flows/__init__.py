"""Prefect flows that compose the stages (see flows/pipeline.py)."""

from pucl.runtime.environment import quiet_defaults

quiet_defaults()  # a worker importing a flow runs with the libraries' telemetry off
