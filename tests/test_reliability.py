"""The short versions of benchmarks/reliability.py (reports/reliability): a few commands
killed at random moments lose nothing, and a few scheduled cycles of `pucl serve` decide,
score and leave no process behind. Real commands in a fresh clone of HEAD: slow."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow


def reliability(tmp_path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "benchmarks/reliability.py"), *args,
                           "--work", str(tmp_path / "work"), "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=1800)


def test_a_few_kills_lose_nothing(tmp_path):
    done = reliability(tmp_path, "kills", "--trials", "4", "--seed", "1")
    assert done.returncode == 0, done.stderr[-3000:]
    rows = pd.read_csv(tmp_path / "kills.csv")
    assert len(rows) == 4 and rows["ok"].all(), rows.to_string()


def test_a_few_scheduled_cycles_decide_and_leave_no_process(tmp_path):
    done = reliability(tmp_path, "soak", "--cycles", "3", "--add-every", "1")
    assert done.returncode == 0, done.stderr[-3000:]
    rows = pd.read_csv(tmp_path / "soak.csv")
    assert len(rows) == 3 and set(rows["decision"]) <= {"promoted", "kept", "skipped"}
    assert (rows["predict_rc"] == 0).all() and (rows["add_rc"].dropna() == 0).all()
    assert "processes left after Ctrl-C: 0" in done.stdout
