"""TIcE (Bekker and Davis 2018) against its parts' definitions: node counts recomputed by
walking the tree by hand, the bound's promise checked by simulation, the label frequency
turned into a prior on a known answer; and the estimator on data with a known prior."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.tree import DecisionTreeClassifier

from pucl.prior.tice import TIcE, lower_bounds, node_counts, prior_from_label_frequency


def naive_node_counts(tree, X, s):
    """Walk each row from the root to its leaf and tally every node it passes."""
    t = tree.tree_
    size = np.zeros(t.node_count, dtype=int)
    labelled = np.zeros(t.node_count, dtype=int)
    for row, label in zip(X, s, strict=True):
        node = 0
        while True:
            size[node] += 1
            labelled[node] += int(label == 1)
            if t.children_left[node] == -1:
                break
            go_left = row[t.feature[node]] <= t.threshold[node]
            node = t.children_left[node] if go_left else t.children_right[node]
    return labelled, size


def test_node_counts_match_a_walk_down_the_tree():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 4))
    s = (X[:, 0] + 0.5 * rng.normal(size=600) > 0.8).astype(int)
    tree = DecisionTreeClassifier(max_leaf_nodes=12, random_state=0).fit(X[:300], s[:300])
    labelled, size = node_counts(tree, X[300:], s[300:])
    expected_labelled, expected_size = naive_node_counts(tree, X[300:], s[300:])
    np.testing.assert_array_equal(size, expected_size)
    np.testing.assert_array_equal(labelled, expected_labelled)
    assert size[0] == 300 and labelled[0] == s[300:].sum()  # the root holds every row


@pytest.mark.parametrize(("c", "size", "delta"), [(0.3, 40, 0.2), (0.6, 200, 0.1)])
def test_the_bound_exceeds_c_at_most_delta_of_the_time(c, size, delta):
    """Cantelli's promise: in a subset free of negatives (each row labelled with
    probability c), the bound is above the true c in at most a delta share of draws."""
    rng = np.random.default_rng(1)
    labelled = rng.binomial(size, c, 20000)
    bounds = lower_bounds(labelled, np.full(20000, size), delta, c)
    assert (bounds > c).mean() <= delta
    worst_case = lower_bounds(labelled, np.full(20000, size), delta)  # c = 1/2 inside
    assert (worst_case <= bounds).all()  # the largest variance gives the largest slack


def test_a_label_frequency_gives_back_the_prior_that_made_it():
    for prior, n_p, n_u in [(0.3, 1000, 60000), (0.7, 500, 2000), (1.0, 10, 10)]:
        c = n_p / (n_p + prior * n_u)
        assert prior_from_label_frequency(c, n_p, n_u) == pytest.approx(prior)
    assert prior_from_label_frequency(1.0, 100, 100) == 0.0  # every positive labelled
    assert prior_from_label_frequency(0.01, 100, 100) == 1.0  # clipped, not 9.9


def separable(prior, n_u=4000, n_p=1000, seed=0):
    """Positives in one corner of the square, negatives in the opposite one."""
    rng = np.random.default_rng(seed)
    n_pos = round(prior * n_u)
    U = np.concatenate([rng.uniform(0.6, 1.0, (n_pos, 2)), rng.uniform(0.0, 0.4, (n_u - n_pos, 2))])
    return U, rng.uniform(0.6, 1.0, (n_p, 2))


@pytest.mark.parametrize("prior", [0.2, 0.5, 0.8])
@pytest.mark.parametrize("seed", [0, 1])
def test_separable_classes_give_the_prior(prior, seed):
    """Nodes inside the positive corner hold positives only, so their share is c; the
    bound lowers it (the estimate errs high) and the best of several noisy nodes raises
    it (errs low). With 16 leaves of 50 rows or more, few nodes compete: within 0.04."""
    U, P = separable(prior, seed=seed)
    estimate = TIcE(max_leaves=16, min_leaf=50, random_state=seed).fit(U, P)
    assert estimate.prior_ == pytest.approx(prior, abs=0.04)
    assert len(estimate.details_["tice_fold_estimates"]) == 2
    assert estimate.prior_ == pytest.approx(np.mean(estimate.details_["tice_fold_estimates"]),
                                            abs=1e-6)  # details are rounded to 6 places


def test_without_positive_rows_in_u_the_estimate_is_near_zero():
    rng = np.random.default_rng(2)
    U, P = rng.uniform(0.0, 0.4, (3000, 2)), rng.uniform(0.6, 1.0, (1000, 2))
    assert TIcE(random_state=0).fit(U, P).prior_ <= 0.03


def test_a_tighter_bound_cannot_raise_the_estimate():
    """A larger delta gives every node a smaller slack, so each fold's c can only grow
    and the prior only fall (one pass, so the variance put in is the same)."""
    U, P = separable(0.5, seed=3)
    loose = TIcE(delta=0.05, passes=1, random_state=0).fit(U, P).prior_
    tight = TIcE(delta=0.3, passes=1, random_state=0).fit(U, P).prior_
    assert tight <= loose


def test_tice_refuses_samples_too_small_for_its_folds():
    U, P = separable(0.5, n_u=400, n_p=40)
    with pytest.raises(ValueError, match=r"TIcE needs at least 50 samples per side \(25 per "
                                         r"fold of its 2 folds, prior.tice.min_leaf and "
                                         r"prior.tice.folds\), got 400 unlabeled and 40 "
                                         r"positive"):
        TIcE().fit(U, P)
