"""Prefect flows that compose the stages (see flows/pipeline.py)."""
