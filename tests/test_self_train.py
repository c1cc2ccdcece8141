"""Self-training's pseudo-labels (classifier.self_train_epochs), against a naive reading of
their definition: sort U by score, call the prior's share at the top positive, and keep
the `keep` share of each side that lies furthest from the cut."""

from __future__ import annotations

import numpy as np
import pytest

from pucl.classify.self_train import confident_pseudo_labels


def naive_pseudo_labels(scores: np.ndarray, prior: float, keep: float) -> dict[int, int]:
    """Row -> label, one row at a time: a row's rank decides its side; its rank within its
    side, counted from the end away from the cut, decides whether it is kept."""
    n = len(scores)
    ranked = sorted(range(n), key=lambda i: (-scores[i], i))
    n_pos = int(round(prior * n))
    out = {}
    for rank, row in enumerate(ranked):
        if rank < n_pos:
            if rank < int(round(keep * n_pos)):
                out[row] = 1
        else:
            from_bottom = n - 1 - rank
            if from_bottom < int(round(keep * (n - n_pos))):
                out[row] = 0
    return out


@pytest.mark.parametrize("prior, keep", [(0.3, 1.0), (0.7, 0.8), (0.5, 0.25), (0.05, 0.6)])
def test_pseudo_labels_match_the_definition(prior, keep):
    scores = np.random.default_rng(7).random(401)
    rows, labels = confident_pseudo_labels(scores, prior, keep)
    got = dict(zip(rows.tolist(), labels.tolist(), strict=True))
    assert got == naive_pseudo_labels(scores, prior, keep)
    assert np.all(np.diff(rows) > 0)  # sorted, no row twice


def test_every_kept_positive_outscores_every_kept_negative_and_the_dropped_lie_between():
    scores = np.random.default_rng(1).random(1000)
    rows, labels = confident_pseudo_labels(scores, 0.7, 0.8)
    assert labels.mean() == pytest.approx(560 / (560 + 240))
    positive, negative = scores[rows[labels == 1]], scores[rows[labels == 0]]
    dropped = np.delete(scores, rows)
    assert positive.min() > dropped.max() >= dropped.min() > negative.max()


def test_keep_one_labels_every_row_with_the_prior_share_positive():
    scores = np.linspace(0.0, 1.0, 50)
    rows, labels = confident_pseudo_labels(scores, 0.3, 1.0)
    np.testing.assert_array_equal(rows, np.arange(50))
    np.testing.assert_array_equal(labels, (np.arange(50) >= 35).astype(np.int64))


def test_tied_scores_are_split_by_row_order():
    rows, labels = confident_pseudo_labels(np.full(10, 0.5), 0.4, 1.0)
    np.testing.assert_array_equal(labels, [1, 1, 1, 1, 0, 0, 0, 0, 0, 0])


@pytest.mark.parametrize("args, message", [
    ((np.array([]), 0.5, 0.8), r"scores must be a non-empty 1-d array, got shape \(0,\)"),
    ((np.zeros((2, 2)), 0.5, 0.8), r"non-empty 1-d array, got shape \(2, 2\)"),
    ((np.zeros(4), 1.0, 0.8), r"prior must be in \(0, 1\), got 1.0"),
    ((np.zeros(4), 0.5, 0.0), r"keep must be in \(0, 1\], got 0.0"),
])
def test_bad_arguments_are_refused(args, message):
    with pytest.raises(ValueError, match=message):
        confident_pseudo_labels(*args)


@pytest.mark.parametrize("objective, method", [("pupl_ce", "contrastive"),
                                               ("naive_ce", "contrastive"),
                                               ("method_head", "ncpu")])
def test_self_training_without_a_pu_objective_is_refused_before_any_stage(objective, method):
    from pucl.config import parse_params
    from pucl.errors import ParamsError
    from pucl.stages.preflight import check_methods

    params = parse_params({"pretrain": {"method": method},
                           "classifier": {"objective": objective, "self_train_epochs": 2}})
    with pytest.raises(ParamsError, match=rf"classifier.self_train_epochs = 2 needs a PU "
                       rf"objective \(allowed with it: nnpu, upu\), got classifier.objective "
                       rf"= '{objective}'"):
        check_methods(params)
    check_methods(parse_params({"classifier": {"objective": "upu", "self_train_epochs": 2}}))


@pytest.mark.parametrize("keep", [0.0, 1.5])
def test_keep_outside_its_range_is_a_params_error(keep):
    from pucl.config import parse_params
    from pucl.errors import ParamsError

    with pytest.raises(ParamsError, match="classifier.self_train_keep"):
        parse_params({"classifier": {"self_train_keep": keep}})
