"""The issue's acceptance numbers on the real default params (slow: about 2 min a seed).

Run with `make test-all` or `pytest -m slow`."""

from __future__ import annotations

import pytest
import yaml

from tests.conftest import ROOT
from tests.helpers import dvc, read_metrics


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_default_pipeline_meets_the_targets(project, seed):
    params = yaml.safe_load((ROOT / "params.yaml").read_text())  # the shipped defaults
    params["base"]["seed"] = seed
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    dvc(project, "repro")
    metrics = read_metrics(project)
    assert metrics["accuracy"] >= 0.93
    if seed == 0:
        assert metrics["prior_abs_error"] <= 0.05
