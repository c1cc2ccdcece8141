"""Held-out P-vs-U scores, DEDPUL, their mean with BBE and TED^n against independent expectations:
known mixture proportions, a naive fixed point written from DEDPUL's equation, invariants
of the cross-fitting, and what they refuse."""

from __future__ import annotations

import numpy as np
import pytest

from pucl.prior import PRIOR_ESTIMATORS
from pucl.prior.bbe import bbe_from_scores
from pucl.prior.dedpul import dedpul_from_scores, density_ratio, fixed_point, negative_share_gap
from pucl.prior.heldout import HeldOutParams, HeldOutScores, heldout_scores


def mixture_scores(prior: float, n_u: int = 20000, n_p: int = 2000, gap: float = 4.0,
                   seed: int = 0) -> HeldOutScores:
    """Scores whose positives and negatives are Gaussians `gap` apart: U is the mixture."""
    rng = np.random.default_rng(seed)
    n_pos = int(prior * n_u)
    u = np.concatenate([rng.normal(gap / 2, 1, n_pos), rng.normal(-gap / 2, 1, n_u - n_pos)])
    p = rng.normal(gap / 2, 1, n_p)
    return HeldOutScores(u, p, np.zeros(n_u, int), np.zeros(n_p, int), "given", (0,))


@pytest.mark.parametrize("prior", [0.3, 0.5, 0.7])
def test_dedpul_recovers_the_mixture_proportion_of_separated_scores(prior):
    estimate, details = dedpul_from_scores(mixture_scores(prior), 0.05, 0.1)
    assert estimate == pytest.approx(prior, abs=0.03)
    assert details["dedpul_rule"] in ("fixed_point", "kink")


def test_density_ratio_never_falls_as_the_score_rises():
    scores = mixture_scores(0.4, seed=3)
    ratio = density_ratio(scores.u, scores.p, 0.05, 0.1)
    assert ratio.shape == scores.u.shape
    assert np.all(np.diff(ratio[np.argsort(scores.u, kind="stable")]) >= 0)
    # far on the positive side U holds positives only: f_p / f_u tends to 1 / prior
    assert ratio.max() == pytest.approx(1 / 0.4, rel=0.1)


def naive_fixed_point(ratio, tolerance=1e-5):
    """DEDPUL's iteration as written: a <- mean(max(0, 1 - (1 - a) r)), from a = 0, until a
    stops moving or no posterior is clipped at 0."""
    a = 0.0
    while True:
        posteriors = [max(0.0, 1.0 - (1.0 - a) * r) for r in ratio]
        mean = sum(posteriors) / len(posteriors)
        if abs(mean - a) < tolerance or min(posteriors) > 0:
            return a
        a = mean


@pytest.mark.parametrize("seed", [0, 1])
def test_fixed_point_matches_the_iteration_written_out(seed):
    rng = np.random.default_rng(seed)
    ratio = np.sort(rng.gamma(2.0, 0.6, 300))
    assert fixed_point(ratio) == pytest.approx(naive_fixed_point(ratio), abs=1e-9)
    gap = negative_share_gap(ratio, [0.0, 0.5])
    assert gap[0] == pytest.approx(np.maximum(0, 1 - ratio).mean())
    assert gap[1] == pytest.approx(np.maximum(0, 1 - 0.5 * ratio).mean() - 0.5)


def test_rows_of_u_equal_to_a_labelled_positive_share_its_fold():
    """Case-control U holds the labelled positives: a fold model must not score, as U, a
    row it learnt as P (that inflated BBE by 0.03 on MNIST-5k)."""
    rng = np.random.default_rng(0)
    positive = rng.normal(1, 1, (60, 3))
    unlabeled = np.concatenate([rng.normal(0, 1, (200, 3)), positive])[rng.permutation(260)]
    settings = HeldOutParams(classifier="logistic", folds=3)
    scores = heldout_scores(unlabeled, positive, (3,), settings, random_state=0)
    fold_of = {row.tobytes(): k for row, k in zip(positive, scores.fold_p, strict=True)}
    copies = [(k, fold_of[row.tobytes()]) for row, k in zip(unlabeled, scores.fold_u,
                                                            strict=True)
              if row.tobytes() in fold_of]
    assert len(copies) == 60 and all(a == b for a, b in copies)
    # each positive knows its copy, and the two carry one score (no tie left to rounding)
    assert np.array_equal(unlabeled[scores.copy_in_u], positive)
    assert np.array_equal(scores.u[scores.copy_in_u], scores.p)
    assert sorted(np.unique(scores.fold_u)) == [0, 1, 2]
    again = heldout_scores(unlabeled, positive, (3,), settings, random_state=0)
    assert np.array_equal(scores.u, again.u) and np.array_equal(scores.p, again.p)


def test_heldout_scores_refuse_sides_too_small_for_the_folds():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="3-fold held-out scores need at least 15 rows per "
                                         "side, got 100 unlabeled and 12 positive"):
        heldout_scores(rng.normal(size=(100, 2)), rng.normal(size=(12, 2)), (2,),
                       HeldOutParams(folds=3), 0)


@pytest.mark.parametrize("name", ["dedpul", "tedn"])
def test_estimators_refuse_too_few_positives_naming_the_minimum(name):
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=r"needs at least 10 samples per side \(5 per fold"):
        PRIOR_ESTIMATORS.create(name).fit(rng.normal(size=(100, 2)), rng.normal(size=(9, 2)))


def test_tedn_is_bbe_on_its_cvir_scores_and_reports_dedpul_on_the_same_scores():
    """TED^n's estimate is BBE on the held-out scores after the CVIR rounds, and its
    dedpul_cvir is DEDPUL on those very scores (both recomputed here from heldout_scores)."""
    rng = np.random.default_rng(3)
    unlabeled = np.concatenate([rng.normal(2, 1, (300, 5)), rng.normal(-2, 1, (700, 5))])
    positive = rng.normal(2, 1, (300, 5))
    settings = {"classifier": "network", "max_steps": 40, "eval_every": 20, "batch_size": 32}
    tedn = PRIOR_ESTIMATORS.create("tedn", random_state=2, **settings).fit(unlabeled, positive)
    assert len(tedn.details_["heldout_cvir_alphas"][0]) == HeldOutParams().cvir_rounds
    scores = heldout_scores(unlabeled, positive, (5,), HeldOutParams(**settings), 2, cvir=True)
    assert tedn.prior_ == pytest.approx(bbe_from_scores(scores, 0.01, 0.1)[0])
    expected, _ = dedpul_from_scores(scores, 0.05, 0.1)
    assert tedn.details_["dedpul_cvir"] == pytest.approx(expected)


def test_the_network_classifier_learns_images_within_its_step_budget():
    """The CNN path on 20x20 images (bright square = positive): a real network, a short
    schedule, an estimate near the truth, and the step each fold stopped at."""
    rng = np.random.default_rng(0)

    def images(n, positive):
        x = rng.uniform(0, 0.3, (n, 1, 20, 20))
        if positive:
            x[:, :, 5:15, 5:15] += 0.6
        return x

    unlabeled = np.concatenate([images(240, True), images(560, False)])
    positive = images(200, True)
    estimator = PRIOR_ESTIMATORS.create("tedn", max_steps=60, eval_every=20, batch_size=32,
                                        random_state=0).fit(unlabeled, positive)
    details = estimator.details_
    assert details["heldout_classifier"] == "network"
    assert all(0 < step <= 60 for step in details["heldout_steps"])
    assert estimator.prior_ == pytest.approx(0.3, abs=0.05)


def test_tedn_reports_an_alpha_per_cvir_round_and_finds_separated_classes():
    """TED^n's CVIR on tabular rows (the MLP path): each fold reports one alpha per round,
    each a prior estimate from its validation slice, and the estimate stays near the truth
    of well-separated classes (0.3). BBE's scorer runs no rounds and reports none."""
    rng = np.random.default_rng(3)
    unlabeled = np.concatenate([rng.normal(2, 1, (300, 5)), rng.normal(-2, 1, (700, 5))])
    positive = rng.normal(2, 1, (300, 5))
    settings = {"classifier": "network", "max_steps": 60, "eval_every": 20, "batch_size": 32,
                "random_state": 0}
    with_cvir = PRIOR_ESTIMATORS.create("tedn", cvir_rounds=3, cvir_epochs=1,
                                        **settings).fit(unlabeled, positive)
    alphas = with_cvir.details_["heldout_cvir_alphas"]
    assert len(alphas) == 2 and all(len(fold) == 3 for fold in alphas)
    assert all(0.15 < a < 0.45 for fold in alphas for a in fold)
    assert with_cvir.prior_ == pytest.approx(0.3, abs=0.05)
    plain = PRIOR_ESTIMATORS.create("bbe", **settings).fit(unlabeled, positive)
    assert "heldout_cvir_alphas" not in plain.details_
    fit = {k: v for k, v in settings.items() if k != "random_state"}
    before = heldout_scores(unlabeled, positive, (5,), HeldOutParams(**fit), 0)
    after = heldout_scores(unlabeled, positive, (5,), HeldOutParams(**fit), 0, cvir=True)
    assert not np.allclose(before.u, after.u)  # the rounds trained the fold models further


def test_tedn_without_rounds_is_bbe():
    rng = np.random.default_rng(5)
    unlabeled = np.concatenate([rng.normal(1, 1, (300, 4)), rng.normal(-1, 1, (500, 4))])
    positive = rng.normal(1, 1, (200, 4))
    settings = {"classifier": "network", "max_steps": 40, "eval_every": 20, "batch_size": 32,
                "random_state": 1}
    tedn = PRIOR_ESTIMATORS.create("tedn", cvir_rounds=0, **settings).fit(unlabeled, positive)
    bbe = PRIOR_ESTIMATORS.create("bbe", **settings).fit(unlabeled, positive)
    assert tedn.prior_ == bbe.prior_


@pytest.mark.parametrize("name", ["bbe", "dedpul", "tedn"])
def test_estimator_defaults_are_the_params_defaults(name):
    """scikit-learn needs the settings spelt out in __init__; they must not drift from
    the params.yaml schema's defaults (prior.heldout)."""
    defaults = PRIOR_ESTIMATORS.create(name).get_params()
    assert {k: defaults[k] for k in HeldOutParams.model_fields} == HeldOutParams().model_dump()


def test_restarts_average_whole_estimates_the_first_with_the_runs_seed():
    """restarts: 3 is the mean of three estimates made apart, with the run's seed and two
    drawn from it (each refitted here as a one-restart estimator), and lists each; the
    estimates differ (their folds and networks do), and one restart is the plain estimate."""
    from pucl.prior.heldout import restart_states

    rng = np.random.default_rng(7)
    unlabeled = np.concatenate([rng.normal(1, 1, (300, 4)), rng.normal(-1, 1, (500, 4))])
    positive = rng.normal(1, 1, (200, 4))
    settings = {"classifier": "network", "max_steps": 40, "eval_every": 20, "batch_size": 32}
    states = restart_states(4, 3)
    assert states[0] == 4 and len(set(states)) == 3 and states == restart_states(4, 3)
    alone = [PRIOR_ESTIMATORS.create("tedn", random_state=s, **settings).fit(unlabeled, positive)
             for s in states]
    averaged = PRIOR_ESTIMATORS.create("tedn", random_state=4, restarts=3,
                                       **settings).fit(unlabeled, positive)
    assert averaged.prior_ == pytest.approx(np.mean([e.prior_ for e in alone]), abs=1e-12)
    listed = averaged.details_["restart_estimates"]
    assert [r["prior"] for r in listed] == [e.prior_ for e in alone]
    assert [r["dedpul_cvir"] for r in listed] == [e.details_["dedpul_cvir"] for e in alone]
    assert len({e.prior_ for e in alone}) > 1
    # each restart's own details stay with it; only averages stand at the top
    assert listed[0] == {"prior": alone[0].prior_, **alone[0].details_}
    assert set(averaged.details_) == {"dedpul_cvir", "restarts", "restart_estimates",
                                      "prior_std", "prior_restart_std"}
    single = PRIOR_ESTIMATORS.create("tedn", random_state=4, restarts=1, **settings)
    assert single.fit(unlabeled, positive).prior_ == alone[0].prior_
    assert "restart_estimates" not in single.details_
