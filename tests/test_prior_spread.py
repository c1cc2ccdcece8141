"""The class prior's measured spread (prior_std), and what pucl does with it: against
independent expectations (the spread over fresh samples of a known score distribution, a
formula written out), the warning, and the widened intervals."""

from __future__ import annotations

import math
import warnings
from dataclasses import replace

import numpy as np
import pytest

from pucl import PUClassifier
from pucl.evaluation.metrics import prior_metrics
from pucl.prior import PRIOR_ESTIMATORS
from pucl.prior.bbe import bbe_from_scores
from pucl.prior.heldout import HeldOutScores, resampled, restarts_spread
from pucl.recipe.prior import (
    Prior,
    PriorUncertainWarning,
    error_allowed,
    half_width,
    uncertainty_warning,
)


def case_control(seed: int, n: int = 2000, prior: float = 0.4, n_p: int = 200
                 ) -> HeldOutScores:
    """Scores of a case-control sample: U is n rows of the mixture (positives around 2,
    negatives around -1), P a draw of U's positives, each P row's copy in U in its fold."""
    rng = np.random.default_rng(seed)
    y = rng.random(n) < prior
    u = np.where(y, rng.normal(2, 1, n), rng.normal(-1, 1, n))
    copy = rng.choice(np.flatnonzero(y), n_p, replace=False)
    fold_p = rng.permutation(n_p) % 2
    fold_u = rng.permutation(n) % 2
    fold_u[copy] = fold_p
    return HeldOutScores(u, u[copy], fold_u, fold_p, "given", (0, 0), (), copy)


def test_the_bootstrap_spread_is_the_spread_over_fresh_samples():
    """BBE's standard deviation over 300 fresh samples, against the mean bootstrap
    prior_std of five samples: the same within 25% (measured: 0.0199 and 0.0201).
    Resampling P and U apart would ignore what a positive shares with its copy in U."""
    fresh = [bbe_from_scores(case_control(seed), 0.01, 0.1)[0] for seed in range(300)]
    bbe = PRIOR_ESTIMATORS.create("bbe")
    boot = [bbe._spread(case_control(1000 + s), 200, s)["prior_std"] for s in range(5)]
    assert np.mean(boot) == pytest.approx(np.std(fresh, ddof=1), rel=0.25)
    apart = [bbe._spread(replace(case_control(1000 + s), copy_in_u=None), 200, s)["prior_std"]
             for s in range(5)]
    assert np.mean(apart) > np.mean(boot)


def test_a_resample_draws_each_positive_with_its_copy_and_keeps_the_folds_sizes():
    scores = case_control(3, n=300, n_p=40)
    draw = resampled(scores, np.random.default_rng(0))
    for k in (0, 1):
        assert (draw.fold_p == k).sum() == (scores.fold_p == k).sum()
        assert (draw.fold_u == k).sum() == (scores.fold_u == k).sum()
    # every drawn positive's score is in U's draw as often as it was drawn (its copy)
    copies = set(scores.u[scores.copy_in_u].tolist())
    u_copies = [v for v in draw.u.tolist() if v in copies]
    assert sorted(u_copies) == sorted(draw.p.tolist())
    again = resampled(scores, np.random.default_rng(0))
    assert np.array_equal(draw.u, again.u) and np.array_equal(draw.p, again.p)


def test_restarts_spread_is_each_restarts_noise_and_their_disagreement_over_root_n():
    runs = [{"prior": 0.40, "prior_std": 0.02}, {"prior": 0.44, "prior_std": 0.03},
            {"prior": 0.42, "prior_std": 0.01}]
    between = float(np.std([0.40, 0.44, 0.42], ddof=1))
    spread = restarts_spread(runs)
    assert spread["prior_restart_std"] == pytest.approx(0.02)
    assert spread["prior_std"] == pytest.approx(math.sqrt(0.02 ** 2 + between ** 2 / 3))
    assert "prior_std" not in restarts_spread([{"prior": 0.4}, {"prior": 0.5}])


def test_the_warning_names_the_prior_its_halfwidth_and_the_stated_error():
    assert uncertainty_warning(0.5, 0.02, 0.03) is None
    assert uncertainty_warning(0.5, None, 0.03) is None
    said = uncertainty_warning(0.558, 0.071, 0.03, 100)
    assert "0.558" in said and "+-0.071" in said and "+-0.030" in said
    assert "100 labelled positives" in said and "evaluate.prior_error" in said
    assert "\n" not in said
    assert error_allowed(0.03, 0.07) == 0.07 and error_allowed(0.03, None) == 0.03
    assert Prior(0.5, "tedn", {"prior_std": 0.01}).halfwidth == pytest.approx(0.0196)
    assert Prior(0.5, "given").halfwidth is None and half_width({}) is None


def test_prior_metrics_give_an_interval_inside_zero_one_only_when_measured():
    assert prior_metrics(0.98, None, 0.05) == {
        "prior_estimate": 0.98, "prior_estimate_low": pytest.approx(0.93),
        "prior_estimate_high": 1.0}
    assert prior_metrics(0.5, 0.45) == {"prior_estimate": 0.5, "prior_true": 0.45,
                                        "prior_abs_error": pytest.approx(0.05)}


def small_table(seed: int = 0):
    """600 rows of two overlapping Gaussian classes (0.7 apart in each of 5 features), 200
    labelled positives: the prior estimate reads about +-0.08 (95%)."""
    rng = np.random.default_rng(seed)
    y = rng.random(600) < 0.5
    x = rng.normal(0, 1, (600, 5)) + 0.7 * y[:, None]
    s = np.zeros(600, int)
    s[rng.choice(np.flatnonzero(y), 200, replace=False)] = 1
    return x.astype(np.float32), s


FAST = {"epochs": 1, "head_epochs": 2, "finetune_epochs": 0, "progress": False}


def test_the_estimator_warns_on_a_small_table_and_its_intervals_cover_the_spread(tmp_path):
    x, s = small_table()
    with pytest.warns(PriorUncertainWarning, match=r"from 180 labelled positives: \+-"):
        clf = PUClassifier(validation_fraction=0.1, **FAST).fit(x, s)
    assert clf.prior_std_ > 0.03 / 1.96
    assert clf._prior_error() == pytest.approx(1.96 * clf.prior_std_)
    path = tmp_path / "clf.pt"
    clf.save(path)
    assert PUClassifier.load(path).prior_std_ == clf.prior_std_


def test_a_given_prior_has_no_spread_and_no_warning():
    x, s = small_table()
    with warnings.catch_warnings():
        warnings.simplefilter("error", PriorUncertainWarning)
        clf = PUClassifier(prior=0.5, **FAST).fit(x, s)
    assert clf.prior_std_ is None


def test_dedpul_bootstraps_at_most_its_bound_and_bbe_every_draw_asked():
    scores = case_control(5, n=400, n_p=60)
    assert PRIOR_ESTIMATORS.create("dedpul")._spread(scores, 100, 0)["prior_bootstrap"] == 20
    assert PRIOR_ESTIMATORS.create("bbe")._spread(scores, 100, 0)["prior_bootstrap"] == 100
    assert PRIOR_ESTIMATORS.create("bbe")._spread(scores, 0, 0) == {}
