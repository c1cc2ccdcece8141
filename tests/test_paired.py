"""The paired difference of two models' label-free accuracies, on constructed scores
whose true difference is known: the held-out U's hidden labels say what each model's
accuracy there is, and the estimate never reads them."""

from __future__ import annotations

import numpy as np
import pytest

from pucl.evaluation.label_free import estimate_metrics
from pucl.evaluation.paired import Difference, paired_difference


def two_models(seed: int, n_p: int = 300, n_u: int = 2000, prior: float = 0.4,
               right: float = 0.92, worse: float = 0.03):
    """SCAR held-out rows scored by model a (right on each row with chance `right`) and
    model b (a, made wrong on a `worse` share of the rows a gets right). Returns the
    scores, U's hidden labels and each model's hits on U."""
    rng = np.random.default_rng(seed)
    y_u = (rng.random(n_u) < prior).astype(int)
    y = np.concatenate([np.ones(n_p, int), y_u])  # P: positives, as U's positives are
    correct_a = rng.random(len(y)) < right
    correct_b = correct_a & ~(rng.random(len(y)) < worse / right)
    score_a = np.where(correct_a, y, 1 - y).astype(float)
    score_b = np.where(correct_b, y, 1 - y).astype(float)
    return (score_a[:n_p], score_a[n_p:], score_b[:n_p], score_b[n_p:], y_u,
            correct_a[n_p:], correct_b[n_p:])


def test_a_model_against_itself_differs_by_nothing():
    p, u, *_ = two_models(0)
    got = paired_difference(p, u, p, u, 0.4)
    assert (got.value, got.low, got.high) == (0.0, 0.0, 0.0) and got.verdict() == "tie"


def test_the_difference_is_the_two_estimates_difference():
    p_a, u_a, p_b, u_b, *_ = two_models(1)
    got = paired_difference(p_a, u_a, p_b, u_b, 0.4)
    a = estimate_metrics(p_a, u_a, 0.4, bootstrap=0)["accuracy"].value
    b = estimate_metrics(p_b, u_b, 0.4, bootstrap=0)["accuracy"].value
    assert got.value == pytest.approx(a - b, abs=1e-12)


def test_the_paired_interval_holds_the_true_difference_and_is_narrower_than_two_intervals():
    held, widths, unpaired = 0, [], []
    for seed in range(60):
        p_a, u_a, p_b, u_b, _, hit_a, hit_b = two_models(seed)
        truth = hit_a.mean() - hit_b.mean()  # on the held-out U, from its hidden labels
        got = paired_difference(p_a, u_a, p_b, u_b, 0.4, bootstrap=400, seed=seed)
        held += got.low <= truth <= got.high
        widths.append(got.high - got.low)
        a, b = (estimate_metrics(p, u, 0.4, bootstrap=400, seed=seed)["accuracy"]
                for p, u in ((p_a, u_a), (p_b, u_b)))
        # the width a difference of two independent estimates would have
        unpaired.append(np.hypot(a.high - a.low, b.high - b.low))
    assert held >= 0.9 * 60, held
    # the rows both predict alike cancel: the pair's interval is a fraction of that
    assert np.mean(widths) < 0.5 * np.mean(unpaired), (np.mean(widths), np.mean(unpaired))


def test_the_verdict_names_the_better_model_or_a_tie():
    p_a, u_a, p_b, u_b, *_ = two_models(2, worse=0.03)
    assert paired_difference(p_a, u_a, p_b, u_b, 0.4).verdict() == "a"
    assert paired_difference(p_b, u_b, p_a, u_a, 0.4).verdict() == "b"
    # two U rows apart out of 2,000: the held-out rows cannot tell
    u_c = u_a.copy()
    u_c[:2] = 1 - u_c[:2]
    assert paired_difference(p_a, u_a, p_a, u_c, 0.4).verdict() == "tie"
    assert Difference(0.01, 0.004, 0.02).verdict(margin=0.005) == "tie"
    assert Difference(0.01, 0.006, 0.02).verdict(margin=0.005) == "a"


def test_two_models_must_score_the_same_rows():
    with pytest.raises(ValueError, match="must score the same rows"):
        paired_difference(np.ones(3), np.ones(5), np.ones(4), np.ones(5), 0.4)
    with pytest.raises(ValueError, match="need held-out P and U"):
        paired_difference(np.ones(0), np.ones(5), np.ones(0), np.ones(5), 0.4)


def test_over_seeds_the_difference_is_the_mean_and_its_interval_narrows():
    from pucl.evaluation.paired import PairedRows, paired_difference_over

    parts, truths, alone = [], [], []
    for seed in (10, 11, 12, 13):
        p_a, u_a, p_b, u_b, _, hit_a, hit_b = two_models(seed, worse=0.01)
        parts.append(PairedRows(p_a, u_a, p_b, u_b, 0.4))
        truths.append(hit_a.mean() - hit_b.mean())
        alone.append(paired_difference(p_a, u_a, p_b, u_b, 0.4, bootstrap=400))
    got = paired_difference_over(parts, bootstrap=400)
    assert got.value == pytest.approx(np.mean([d.value for d in alone]), abs=1e-12)
    assert got.low <= np.mean(truths) <= got.high
    # four independent parts: about half a part's width (1 / sqrt(4))
    width = np.mean([d.high - d.low for d in alone])
    assert 0.35 * width < got.high - got.low < 0.7 * width
    with pytest.raises(ValueError, match="at least one held-out part"):
        paired_difference_over([])


def test_the_interval_is_the_naive_paired_bootstrap_whatever_the_slices(monkeypatch):
    """Against the bootstrap written out: resample P's and U's rows (the same rows for
    both models), each model's accuracy from its TPR and U's positive rate, percentiles
    of a's minus b's. Small slices must give the numbers of one block."""
    import pucl.evaluation.label_free as label_free

    p_a, u_a, p_b, u_b, *_ = two_models(4, n_p=60, n_u=500)
    rng = np.random.default_rng(9)
    rows_p, rows_u = rng.integers(0, 60, (50, 60)), rng.integers(0, 500, (50, 500))

    def accuracy(p, u):  # pi TPR + (1 - pi)(1 - FPR), FPR = (r - pi TPR) / (1 - pi)
        tpr, r = (p[rows_p] >= 0.5).mean(axis=1), (u[rows_u] >= 0.5).mean(axis=1)
        fpr = (r - 0.4 * tpr) / 0.6
        return 0.4 * tpr + 0.6 * (1 - fpr)

    low, high = np.percentile(accuracy(p_a, u_a) - accuracy(p_b, u_b), [2.5, 97.5])
    for cells in (4_000_000, 700):
        monkeypatch.setattr(label_free, "RESAMPLE_CELLS", cells)
        got = paired_difference(p_a, u_a, p_b, u_b, 0.4, bootstrap=50, seed=9)
        assert (got.low, got.high) == pytest.approx((low, high), abs=1e-12), cells


def test_a_prior_that_clips_fpr_still_reads_the_models_difference_on_u():
    """Two models with one TPR (0.9) on U of prior 0.3, a with no false positives and b
    calling 5% of the negatives positive, read with a prior of 0.4 (too high): each
    model's FPR from U would be below 0, which a single estimate clips, so their clipped
    accuracies are level. The true difference is 0.7 x 0.05 = 0.035 whatever the prior,
    since the TPRs agree; the paired difference reads it and its interval holds it."""
    rng = np.random.default_rng(5)
    y_u = rng.random(20000) < 0.3
    found = rng.random(20000) < 0.9
    u_a = (y_u & found).astype(float)
    u_b = (y_u & found | ~y_u & (rng.random(20000) < 0.05)).astype(float)
    p_a = p_b = (rng.random(2000) < 0.9).astype(float)
    truth = ((u_a >= 0.5) == y_u).mean() - ((u_b >= 0.5) == y_u).mean()
    assert u_b.mean() < 0.4 * p_b.mean()  # b's FPR from U would be negative, a's too
    clipped = [estimate_metrics(p, u, 0.4, bootstrap=0)["accuracy"].value
               for p, u in ((p_a, u_a), (p_b, u_b))]
    assert clipped[0] == pytest.approx(clipped[1], abs=1e-12)  # the clip hides b's errors
    got = paired_difference(p_a, u_a, p_b, u_b, 0.4, bootstrap=400, seed=5)
    assert got.value == pytest.approx(truth, abs=1e-12)  # equal TPRs: exact on U
    assert got.low <= truth <= got.high and got.verdict() == "a"


def scar_pair(prior: float, n_p: int, n_u: int, tpr_a: float, tpr_b: float, fpr: float,
              seed: int):
    """Held-out P and U where model a finds `tpr_a` of the positives and b `tpr_b`, both
    with false positive rate `fpr` (each row's hit drawn apart), and the true difference of
    their accuracies on U from U's hidden labels."""
    rng = np.random.default_rng(seed)
    y_u = rng.random(n_u) < prior
    u = [np.where(y_u, rng.random(n_u) < t, rng.random(n_u) < fpr).astype(float)
         for t in (tpr_a, tpr_b)]
    p = [(rng.random(n_p) < t).astype(float) for t in (tpr_a, tpr_b)]
    truth = ((u[0] >= 0.5) == y_u).mean() - ((u[1] >= 0.5) == y_u).mean()
    return p[0], u[0], p[1], u[1], float(truth)


def test_a_wrong_prior_moves_the_difference_by_twice_its_error_times_the_tpr_gap():
    """Known answer: acc_a - acc_b = (r_b - r_a) + 2 pi (TPR_a - TPR_b), so a prior off by
    d moves it by 2 d (TPR_a - TPR_b) and no more."""
    p_a, u_a, p_b, u_b, _ = scar_pair(0.5, 2000, 20000, 0.9, 0.6, 0.1, seed=3)
    gap = (p_a >= 0.5).mean() - (p_b >= 0.5).mean()
    at = {pi: paired_difference(p_a, u_a, p_b, u_b, pi, bootstrap=0).value
          for pi in (0.45, 0.5)}
    assert at[0.5] - at[0.45] == pytest.approx(2 * 0.05 * gap, abs=1e-12)


def test_the_priors_error_widens_the_interval_so_it_holds_the_truth_under_a_wrong_prior():
    """Prior 0.5, estimated 0.47 with a stated 95% half-width of 0.05: on large samples
    the bootstrap's interval alone is narrow and misses the true difference, the interval
    with the prior's part holds it."""
    held = {0.0: 0, 0.05: 0}
    for seed in range(10):
        p_a, u_a, p_b, u_b, truth = scar_pair(0.5, 20000, 40000, 0.9, 0.6, 0.1, seed)
        for error in held:
            got = paired_difference(p_a, u_a, p_b, u_b, 0.47, bootstrap=100, seed=seed,
                                    prior_error=error)
            held[error] += got.low <= truth <= got.high
    assert held[0.0] <= 2 and held[0.05] == 10, held


def test_the_priors_part_joins_the_bootstraps_as_an_independent_error():
    """Each side: the root of the sum of the squares of the bootstrap's half and
    2 e |TPR_a - TPR_b|; models that agree on P get nothing from the prior."""
    p_a, u_a, p_b, u_b, _ = scar_pair(0.4, 300, 2000, 0.9, 0.8, 0.1, seed=5)
    alone = paired_difference(p_a, u_a, p_b, u_b, 0.4, bootstrap=300, seed=1)
    got = paired_difference(p_a, u_a, p_b, u_b, 0.4, bootstrap=300, seed=1,
                            prior_error=0.03)
    shift = 2 * 0.03 * abs((p_a >= 0.5).mean() - (p_b >= 0.5).mean())
    assert got.value == alone.value
    assert got.value - got.low == pytest.approx(np.hypot(alone.value - alone.low, shift))
    assert got.high - got.value == pytest.approx(np.hypot(alone.high - alone.value, shift))
    same_p = paired_difference(p_a, u_a, p_a, u_b, 0.4, bootstrap=300, seed=1,
                               prior_error=0.03)
    plain = paired_difference(p_a, u_a, p_a, u_b, 0.4, bootstrap=300, seed=1)
    assert (same_p.low, same_p.high) == (plain.low, plain.high)


def test_over_seeds_the_priors_shifts_add_as_one_error():
    """An estimator's bias is shared by the seeds: the mean difference's prior part is
    the mean of the parts' shifts, which do not shrink as independent errors would."""
    from pucl.evaluation.paired import PairedRows, paired_difference_over

    parts = [PairedRows(*scar_pair(0.5, 2000, 20000, 0.9, 0.6, 0.1, seed)[:4], 0.45, 0.05)
             for seed in (30, 31, 32, 33)]
    got = paired_difference_over(parts, bootstrap=200)
    gaps = [(part.p_a >= 0.5).mean() - (part.p_b >= 0.5).mean() for part in parts]
    assert got.high - got.value >= 2 * 0.05 * np.mean(gaps) - 1e-12
