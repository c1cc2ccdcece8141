"""BBE (Garg et al. 2021) against its definition: the bin chosen by the upper confidence
bound, computed here by a plain loop over thresholds; and what it refuses."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pucl.prior.bbe import BBE, best_bin


def naive_best_bin(scores_p, scores_u, gamma, delta):
    """The paper's estimator written out: every threshold c at a held-out positive score,
    q(c) = share of scores >= c, the bound, its minimiser, q_u / q_p there."""
    n_p, n_u = len(scores_p), len(scores_u)
    slack = math.sqrt(math.log(4 / delta) / (2 * n_p)) + math.sqrt(math.log(4 / delta) / (2 * n_u))
    best = None
    for c in sorted(scores_p, reverse=True):
        q_p = sum(s >= c for s in scores_p) / n_p
        q_u = sum(s >= c for s in scores_u) / n_u
        bound = q_u / q_p + (1 + gamma) / q_p * slack
        if best is None or bound < best[0]:
            best = (bound, min(q_u / q_p, 1.0), c)
    return best[1], best[2]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_best_bin_matches_the_definition(seed):
    rng = np.random.default_rng(seed)
    scores_p = rng.beta(5, 2, 200)
    scores_u = np.concatenate([rng.beta(5, 2, 90), rng.beta(2, 5, 210)])
    scores_u[:5] = scores_p[:5]  # ties between the two samples
    estimate, threshold, _, _ = best_bin(scores_p, scores_u, 0.01, 0.1)
    expected, expected_c = naive_best_bin(scores_p, scores_u, 0.01, 0.1)
    assert estimate == pytest.approx(expected) and threshold == pytest.approx(expected_c)


def test_a_pure_top_bin_recovers_the_mixture_proportion():
    """Scores that separate P from N perfectly: q_u / q_p at the top is the prior."""
    rng = np.random.default_rng(0)
    scores_p = rng.uniform(0.6, 1.0, 5000)
    scores_u = np.concatenate([rng.uniform(0.6, 1.0, 3000), rng.uniform(0.0, 0.4, 7000)])
    estimate, threshold, q_p, _ = best_bin(scores_p, scores_u, 0.01, 0.1)
    assert estimate == pytest.approx(0.3, abs=0.02) and threshold >= 0.6 and q_p > 0.5


def test_bbe_refuses_samples_too_small_to_hold_out():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=r"BBE needs at least 10 samples per side \(5 per fold "
                                         r"of its 2-fold held-out split, prior.heldout.folds\), "
                                         r"got 200 unlabeled and 6 positive"):
        BBE().fit(rng.normal(size=(200, 3)), rng.normal(size=(6, 3)))


def test_bbe_averages_each_folds_best_bin():
    """Each fold's estimate is the best bin of the scores that fold's model gave to rows it
    did not see; BBE's answer is their mean."""
    rng = np.random.default_rng(1)
    unlabeled = np.concatenate([rng.normal(2, 1, (300, 4)), rng.normal(-2, 1, (700, 4))])
    positive = rng.normal(2, 1, (400, 4))
    estimator = BBE(random_state=0).fit(unlabeled, positive)
    scores = estimator._scores(unlabeled, positive)  # the same seed: the same scores
    folds = [naive_best_bin(scores.p[scores.fold_p == k], scores.u[scores.fold_u == k],
                            0.01, 0.1)[0] for k in range(2)]
    assert estimator.details_["bbe_fold_estimates"] == pytest.approx(folds, abs=1e-6)
    assert estimator.prior_ == pytest.approx(np.mean(folds), abs=1e-6)
    assert estimator.details_["heldout_classifier"] == "logistic"  # feature rows
    assert abs(estimator.prior_ - 0.3) < 0.05
