"""Label-free metrics against the labelled truth: on synthetic data with a known answer,
the estimates from held-out P and U and the prior match what U's hidden labels say."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, f1_score, precision_score, recall_score, roc_auc_score

from pucl.evaluation.label_free import (
    Estimate,
    auc_p_vs_u,
    drop_alert,
    error_parts,
    estimate_metrics,
    point_estimates,
    validation_metrics,
)


def pu_sample(prior: float, n_p: int, n_u: int, seed: int):
    """Scores of a fixed noisy classifier: positives ~ N(1, 1), negatives ~ N(-1, 1),
    squashed to (0, 1). P is a sample of the positives (SCAR); U mixes both at `prior`."""
    rng = np.random.default_rng(seed)
    y_u = (rng.random(n_u) < prior).astype(int)
    raw_u = rng.normal(np.where(y_u == 1, 1.0, -1.0), 1.0)
    raw_p = rng.normal(1.0, 1.0, n_p)
    squash = lambda z: 1.0 / (1.0 + np.exp(-z))  # noqa: E731
    return squash(raw_p), squash(raw_u), y_u


@pytest.mark.parametrize("prior", [0.3, 0.5, 0.7])
def test_estimates_match_the_labelled_truth_on_u(prior):
    p, u, y = pu_sample(prior, 20000, 40000, seed=1)
    est = point_estimates(p, u, float(y.mean()))
    predicted = (u >= 0.5).astype(int)
    assert est["accuracy"] == pytest.approx(accuracy_score(y, predicted), abs=0.01)
    assert est["recall"] == pytest.approx(recall_score(y, predicted), abs=0.01)
    assert est["precision"] == pytest.approx(precision_score(y, predicted), abs=0.01)
    assert est["f1"] == pytest.approx(f1_score(y, predicted), abs=0.01)
    assert est["roc_auc"] == pytest.approx(roc_auc_score(y, u), abs=0.01)
    tpr, fpr = predicted[y == 1].mean(), predicted[y == 0].mean()
    assert est["balanced_error"] == pytest.approx((1 - tpr + fpr) / 2, abs=0.01)


def test_a_perfect_classifier_is_estimated_perfect():
    y = np.r_[np.ones(30), np.zeros(70)]
    est = point_estimates(np.ones(50), y.copy(), prior=0.3)
    assert est == {"accuracy": 1.0, "balanced_error": 0.0, "precision": 1.0, "recall": 1.0,
                   "f1": 1.0, "roc_auc": 1.0}


def test_auc_of_p_against_u_is_the_mann_whitney_statistic():
    rng = np.random.default_rng(0)
    p, u = rng.integers(0, 5, 40).astype(float), rng.integers(0, 5, 60).astype(float)
    pairs = [(a > b) + 0.5 * (a == b) for a in p for b in u]  # ties counted half
    assert auc_p_vs_u(p, u) == pytest.approx(np.mean(pairs))


def test_the_bootstrap_is_a_loop_over_resampled_rows(monkeypatch):
    """The interval's draws, computed from row counts, against the plain loop: resample P
    and U with rng.choice, score each resample, take percentiles. Scores are rounded so
    that ties between P and U (counted half in the AUC) occur; a small slice size makes
    the counts run in several slices."""
    import pucl.evaluation.label_free as label_free

    monkeypatch.setattr(label_free, "RESAMPLE_CELLS", 700)
    rng = np.random.default_rng(3)
    p, u = np.round(rng.beta(3, 1, 90), 1), np.round(rng.beta(1.5, 1.5, 400), 1)
    got = estimate_metrics(p, u, 0.35, bootstrap=30, seed=11)
    draw = np.random.default_rng(11)
    draws = [point_estimates(draw.choice(p, len(p)), draw.choice(u, len(u)), 0.35)
             for _ in range(30)]
    for name, estimate in got.items():
        low, high = np.percentile([d[name] for d in draws], [2.5, 97.5])
        assert (estimate.low, estimate.high) == pytest.approx((low, high), abs=1e-12), name


def test_intervals_cover_the_truth_and_the_prior_moves_accuracy_by_2tpr_minus_1():
    p, u, y = pu_sample(0.4, 1500, 3000, seed=2)
    truth = accuracy_score(y, (u >= 0.5).astype(int))
    est = estimate_metrics(p, u, float(y.mean()), prior_error=0.02, bootstrap=300, seed=0)
    acc = est["accuracy"]
    assert acc.low <= truth <= acc.high
    assert acc.low < acc.value < acc.high and acc.high - acc.low < 0.06
    tpr = est["recall"].value
    assert acc.at_prior_high - acc.value == pytest.approx((2 * tpr - 1) * 0.02, abs=1e-9)
    assert acc.value - acc.at_prior_low == pytest.approx((2 * tpr - 1) * 0.02, abs=1e-9)
    again = estimate_metrics(p, u, float(y.mean()), prior_error=0.02, bootstrap=300, seed=0)
    assert again == est  # seeded


@pytest.mark.parametrize("prior, p, u, message", [
    (1.0, [0.9], [0.1], "prior must be in \\(0, 1\\), got 1.0"),
    (0.5, [], [0.1], "need held-out P and U scores, got 0 and 1 rows"),
])
def test_bad_inputs_are_named(prior, p, u, message):
    with pytest.raises(ValueError, match=message):
        estimate_metrics(np.array(p), np.array(u), prior)


def test_the_interval_adds_the_bootstrap_and_the_prior_part_as_independent_errors():
    """Each side: sqrt(bootstrap part^2 + prior part^2), written out by hand."""
    est = Estimate(value=0.90, low=0.88, high=0.92, at_prior_low=0.87, at_prior_high=0.93)
    side = (0.02 ** 2 + 0.03 ** 2) ** 0.5
    assert est.interval() == pytest.approx((0.90 - side, 0.90 + side))
    # a prior end that moves the estimate the other way counts on the other side only
    side = (0.02 ** 2 + 0.01 ** 2) ** 0.5
    assert Estimate(0.9, 0.88, 0.92, 0.91, 0.89).interval() == pytest.approx(
        (0.9 - side, 0.9 + side))
    assert Estimate(0.9, 0.88, 0.92, 0.9, 0.9).interval() == pytest.approx((0.88, 0.92))
    low, high = Estimate(0.99, 0.98, 1.0, 0.97, 1.0).interval()  # a rate stays <= 1
    assert (low, high) == (pytest.approx(0.99 - (0.01 ** 2 + 0.02 ** 2) ** 0.5), 1.0)


def test_the_interval_holds_the_truth_about_95_percent_of_the_time():
    """Simulated SCAR parts (prior 0.3, TPR 0.88, FPR 0.05) whose prior estimate errs by a
    normal error with a 95% half-width of evaluate.prior_error: the interval holds U's
    true accuracy in about 95% of 200 draws; adding the two parts (the worst case of
    both at once) would hold it nearly always, wider than 95% needs."""
    rng = np.random.default_rng(0)
    prior, tpr, fpr, error = 0.3, 0.88, 0.05, 0.03
    truth = prior * tpr + (1 - prior) * (1 - fpr)
    held, held_added = [], []
    for trial in range(200):
        p = np.where(rng.random(300) < tpr, 0.9, 0.1)
        y = rng.random(1000) < prior
        u = np.where(rng.random(1000) < np.where(y, tpr, fpr), 0.9, 0.1)
        guess = prior + rng.normal(0.0, error / 1.96)
        acc = estimate_metrics(p, u, guess, prior_error=error, bootstrap=100,
                               seed=trial)["accuracy"]
        low, high = acc.interval()
        held.append(low <= truth <= high)
        added = (acc.low - abs(acc.at_prior_low - acc.value),
                 acc.high + abs(acc.at_prior_high - acc.value))
        held_added.append(added[0] <= truth <= added[1])
    assert 0.90 <= np.mean(held) <= 0.985
    assert np.mean(held_added) > np.mean(held)


def test_validation_metrics_estimate_from_p_and_u_and_check_against_u_labels():
    p, u, y = pu_sample(0.3, 300, 3000, seed=4)
    out = validation_metrics(p, u, prior=0.33, prior_error=0.03, y_u=y, seed=1)
    predicted = (u >= 0.5).astype(int)
    assert out["val_true_accuracy"] == accuracy_score(y, predicted)  # from the labels
    assert out["val_true_f1"] == f1_score(y, predicted)
    assert out["val_true_auc"] == roc_auc_score(y, u)
    assert (out["val_n_p"], out["val_n_u"], out["val_prior"]) == (300, 3000, 0.33)
    assert out["val_tpr"] == (p >= 0.5).mean() and out["val_positive_rate"] == predicted.mean()
    assert out["val_true_prior"] == y.mean()
    assert out["val_true_tpr"] == recall_score(y, predicted)
    for name in ("accuracy", "auc", "f1"):  # a prior 0.03 off still lands in the interval
        assert out[f"val_est_{name}_low"] <= out[f"val_true_{name}"] \
            <= out[f"val_est_{name}_high"], name
        assert out[f"val_est_{name}_low"] < out[f"val_est_{name}"] <= out[f"val_est_{name}_high"]
    # the estimate never reads the labels: without them, the same numbers and no truth
    blind = validation_metrics(p, u, prior=0.33, prior_error=0.03, seed=1)
    assert blind == {k: v for k, v in out.items() if not k.startswith("val_true_")}
    # the miss splits exactly into the prior's part and the held-out P's part
    prior_part, tpr_part = error_parts(0.33, out["val_tpr"], out["val_true_prior"],
                                       out["val_true_tpr"])
    assert prior_part + tpr_part == pytest.approx(
        out["val_est_accuracy"] - out["val_true_accuracy"], abs=1e-12)
    unknown = np.where(np.arange(len(y)) == 0, -1, y)  # one unknown label: no truth
    assert "val_true_accuracy" not in validation_metrics(p, u, 0.33, 0.03, unknown)


def test_an_alert_only_when_the_whole_interval_lies_below_the_reference():
    est = Estimate(value=0.80, low=0.76, high=0.84, at_prior_low=0.78, at_prior_high=0.82)
    assert est.interval() == pytest.approx((0.80 - 0.02 * 5 ** 0.5, 0.80 + 0.02 * 5 ** 0.5))
    assert drop_alert(est, 0.84, "batch 00002") is None  # the interval reaches it
    assert drop_alert(est, 0.90, "batch 00002") == (
        "batch 00002: estimated accuracy 0.8000 [0.7553, 0.8447] is below the 0.9000 it "
        "scored on the holdout")


def test_the_expected_halfwidth_is_the_spread_over_fresh_held_out_parts():
    """accuracy_halfwidth against 400 simulated SCAR parts (TPR 0.9, FPR 0.1, prior 0.4,
    40 positives and 400 unlabeled rows): 1.96 times the estimates' spread, within 10%."""
    from pucl.evaluation.label_free import accuracy_halfwidth, point_estimates

    rng = np.random.default_rng(0)
    estimates = []
    for _ in range(400):
        y_u = rng.random(400) < 0.4
        u = np.where(y_u, rng.random(400) < 0.9, rng.random(400) < 0.1).astype(float)
        p = (rng.random(40) < 0.9).astype(float)
        estimates.append(point_estimates(p, u, 0.4)["accuracy"])
    assert accuracy_halfwidth(40, 400, 0.4) == pytest.approx(1.96 * np.std(estimates),
                                                             rel=0.1)
    assert accuracy_halfwidth(400, 4000, 0.4) < accuracy_halfwidth(40, 400, 0.4) / 3


def test_the_expected_halfwidth_with_a_prior_error_is_the_spread_under_that_error():
    """With a prior whose estimate strays by N(0, (e / 1.96)^2), 1.96 times the spread of
    the estimates over fresh parts (TPR 0.9, FPR 0.1, prior 0.4, 400 positives, 4,000
    unlabeled rows) is accuracy_halfwidth(..., prior_error=e), within 10%: the prior's
    part, (2 TPR - 1) e, adds to the rows' as an independent error. (At this prior FPR
    stays above 0 for priors up to 0.467; beyond, clipping would shrink the prior's part.)"""
    from pucl.evaluation.label_free import accuracy_halfwidth, point_estimates

    rng = np.random.default_rng(1)
    error, estimates = 0.06, []
    for _ in range(400):
        y_u = rng.random(4000) < 0.4
        u = np.where(y_u, rng.random(4000) < 0.9, rng.random(4000) < 0.1).astype(float)
        p = (rng.random(400) < 0.9).astype(float)
        prior = 0.4 + rng.normal(0.0, error / 1.96)
        estimates.append(point_estimates(p, u, prior)["accuracy"])
    expected = accuracy_halfwidth(400, 4000, 0.4, prior_error=error)
    assert expected == pytest.approx(1.96 * np.std(estimates), rel=0.1)
    rows = accuracy_halfwidth(400, 4000, 0.4)
    assert 0.8 * error > rows and expected < rows + 0.8 * error  # a root of squares, not a sum
