"""Promotion on a PU holdout by the paired difference (pucl.flows.retrain): the challenger
replaces the champion only when the whole interval of its estimated accuracy minus the
champion's clears tracking.min_improvement. Constructed scores whose true difference is
known: the hidden labels of the holdout's rows say what each model's accuracy on U is."""

from __future__ import annotations

import numpy as np
import pytest

from pucl.data.tracked import Holdout
from pucl.evaluation.label_free import point_estimates
from pucl.flows.retrain import paired_on_holdout


def holdout_and_models(seed: int, worse: float, n_p: int = 300, n_other: int = 2000):
    """A case-control PU holdout (U: every row, the labelled positives included) scored by
    a champion right on each row with chance 0.9 and a challenger that is right where the
    champion is, except on a `worse` share of rows (negative: it fixes that share of the
    champion's mistakes instead). Returns the holdout, both score vectors and the true
    difference of their accuracies on U."""
    rng = np.random.default_rng(seed)
    y = np.concatenate([np.ones(n_p, int), (rng.random(n_other) < 0.4).astype(int)])
    pu = np.r_[np.ones(n_p, int), np.zeros(n_other, int)]
    champion_right = rng.random(len(y)) < 0.9
    if worse > 0:  # wrong on a share of the rows the champion gets right
        challenger_right = champion_right & ~(rng.random(len(y)) < worse / 0.9)
    else:  # right on a share of the rows the champion gets wrong
        challenger_right = champion_right | (rng.random(len(y)) < -worse / 0.1)
    champion = np.where(champion_right, y, 1 - y).astype(float)
    challenger = np.where(challenger_right, y, 1 - y).astype(float)
    hold = Holdout(np.zeros((len(y), 2), np.float32), np.full(len(y), -1), pu,
                   float(y.mean()))
    truth = challenger_right.mean() - champion_right.mean()
    return hold, challenger, champion, truth


@pytest.mark.parametrize("worse, verdict", [(-0.05, "a"), (0.05, "b")])
def test_a_clear_gain_promotes_and_a_clear_loss_keeps(worse, verdict):
    hold, challenger, champion, truth = holdout_and_models(0, worse)
    diff = paired_on_holdout(challenger, champion, hold, "case_control")
    assert diff.low <= truth <= diff.high
    assert diff.verdict(0.0) == verdict
    # the value is the two estimates' difference, on the same rows and prior
    p, u = hold.pu == 1, np.ones(len(hold.pu), bool)
    estimate = {name: point_estimates(s[p], s[u], hold.prior)["accuracy"]
                for name, s in (("challenger", challenger), ("champion", champion))}
    assert diff.value == pytest.approx(estimate["challenger"] - estimate["champion"])


def test_a_gain_within_the_noise_keeps_the_champion():
    """The challenger's estimate is higher, which the margin rule alone (challenger >
    champion + 0) would promote; the paired interval holds 0, so it is a tie."""
    hold, challenger, champion, truth = holdout_and_models(3, -0.003)
    diff = paired_on_holdout(challenger, champion, hold, "case_control")
    assert diff.value > 0 and diff.low < 0 < diff.high and diff.verdict(0.0) == "tie"
    assert diff.low <= truth <= diff.high


def test_a_margin_asks_the_interval_to_clear_it():
    hold, challenger, champion, _ = holdout_and_models(0, -0.05)
    diff = paired_on_holdout(challenger, champion, hold, "case_control")
    assert diff.verdict(0.0) == "a" and diff.verdict(diff.low + 0.001) == "tie"


def test_the_interval_holds_the_true_difference_in_most_draws():
    held = 0
    for seed in range(40):
        hold, challenger, champion, truth = holdout_and_models(100 + seed, -0.02)
        diff = paired_on_holdout(challenger, champion, hold, "case_control", seed=seed)
        held += diff.low <= truth <= diff.high
    assert held >= 34  # a 95% interval: at least 85% of 40 draws


def test_a_gain_that_only_a_prior_set_too_high_shows_is_a_tie_within_the_priors_error():
    """Two models of equal true accuracy on U (0.89): the challenger finds more positives
    (TPR 0.95 against 0.85) at the cost of more false positives (0.15 against 1/12). With
    the holdout's prior frozen 0.06 too high the estimate favours the higher TPR by
    2 x 0.06 x 0.1 = 0.012, which the rows' noise alone would promote; with the prior's
    error (evaluate.prior_error) in the interval it is a tie, and the truth is inside."""
    rng = np.random.default_rng(7)
    n_p, n_u = 20000, 50000
    y = np.r_[np.ones(n_p, int), (rng.random(n_u) < 0.4).astype(int)]
    pu = np.r_[np.ones(n_p, int), np.zeros(n_u, int)]
    draw = rng.random(len(y))
    challenger = np.where(y == 1, draw < 0.95, draw < 0.15).astype(float)
    champion = np.where(y == 1, draw < 0.85, draw < 1 / 12).astype(float)
    u = pu == 0  # U under single_dataset: the rows not labelled
    truth = ((challenger[u] >= 0.5) == y[u]).mean() - ((champion[u] >= 0.5) == y[u]).mean()
    hold = Holdout(np.zeros((len(y), 2), np.float32), np.full(len(y), -1), pu,
                   float(y[u].mean()) + 0.06)
    rows_only = paired_on_holdout(challenger, champion, hold, "single_dataset")
    with_prior = paired_on_holdout(challenger, champion, hold, "single_dataset",
                                   prior_error=0.08)
    assert abs(truth) < 0.003
    assert rows_only.verdict(0.0) == "a" and not rows_only.low <= truth <= rows_only.high
    assert with_prior.verdict(0.0) == "tie" and with_prior.low <= truth <= with_prior.high
