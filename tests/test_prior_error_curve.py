"""benchmarks/prior_error_curve.py's bookkeeping, on hand-made scores and rows (no
pipeline runs): the two cut diagnostics against a brute force over every threshold, and
the summary's means per offset."""

from __future__ import annotations

import importlib

import numpy as np
import pandas as pd
import pytest

from pucl.evaluation.metrics import roc_points


@pytest.fixture
def curve(monkeypatch):
    # the script defaults PUCL_TRACKING to off on import: keep that inside this test
    monkeypatch.setenv("PUCL_TRACKING", "off")
    return importlib.import_module("benchmarks.prior_error_curve")


def scored(seed: int = 0, n: int = 400):
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.3).astype(int)
    score = np.round(rng.normal(y * 1.2, 1.0), 1)  # rounded: ties, as saturated heads give
    return y, score


def accuracy_at(y, score, threshold):
    return float(((score >= threshold).astype(int) == y).mean())


def test_the_best_cut_is_the_best_accuracy_of_any_threshold(curve):
    y, score = scored()
    cuts = [np.inf, *np.unique(score)]  # inf: every row negative
    brute = max(accuracy_at(y, score, t) for t in cuts)
    got = curve.cut_diagnostics(pd.DataFrame(roc_points(y, score)), y.mean(), 0.3)
    assert got["acc_best_cut"] == pytest.approx(brute, abs=1e-12)


def test_the_share_cut_is_the_accuracy_where_that_share_is_called_positive(curve):
    y, score = scored(seed=1)
    for threshold in np.unique(score)[5:-5:7]:
        share = float((score >= threshold).mean())
        got = curve.cut_diagnostics(pd.DataFrame(roc_points(y, score)), y.mean(), share)
        assert got["acc_share_cut"] == pytest.approx(accuracy_at(y, score, threshold),
                                                     abs=1e-9)


def test_the_summary_averages_each_offset_over_its_seeds(curve, tmp_path):
    rows = pd.DataFrame([
        {"preset": "fmnist-i", "variant": "v", "settings": "default", "seed": seed,
         "offset": offset, "accuracy": acc, "roc_auc": 0.9, "acc_best_cut": acc + 0.01,
         "acc_share_cut": acc, "val_est_accuracy": acc, "val_true_accuracy": acc}
        for seed, offset, acc in [(0, 0.0, 0.92), (1, 0.0, 0.94), (0, 0.05, 0.90)]])
    table = curve.summarise(rows, tmp_path / "curve.csv")
    by_offset = table.set_index("offset")
    assert by_offset.loc[0.0, "n"] == 2 and by_offset.loc[0.05, "n"] == 1
    assert by_offset.loc[0.0, "accuracy"] == pytest.approx(0.93)
    assert by_offset.loc[0.0, "accuracy_std"] == pytest.approx(np.std([0.92, 0.94], ddof=1))
    assert (tmp_path / "curve_summary.csv").exists() and (tmp_path / "curve.png").exists()
