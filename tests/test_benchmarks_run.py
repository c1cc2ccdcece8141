"""Every speed benchmark still runs (slow: about 3.5 minutes on 2 cores; `make test-all`).

Benchmarks are scripts, not tests, so nothing else runs them; two had been failing
unnoticed (km2_speed on a params.yaml without `prior.km`, pipeline_timing on the tracked
dataset's folder). This runs each one's quick mode, as
`python -m benchmarks --quick` does, and checks it ends well and writes nothing tracked."""

from __future__ import annotations

import subprocess
import sys

import pytest

from benchmarks.__main__ import SUITE
from tests.conftest import ROOT


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SUITE))
def test_the_benchmark_runs_in_its_quick_mode(name):
    before = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout
    result = subprocess.run([sys.executable, "-m", "benchmarks", "--quick", "--only", name],
                            cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert f"--- {name}:" in result.stdout and "FAILED" not in result.stdout
    after = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout
    assert after == before  # a quick run writes no report
