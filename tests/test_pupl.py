"""PUPL on separated Gaussian blobs, against the known labels."""

from __future__ import annotations

import numpy as np
import pytest

from pucl.pupl import prior_rank, pu_kmeans


def blobs(n_pos=600, n_neg=900, n_labeled=30, dim=16, seed=0):
    rng = np.random.default_rng(seed)
    centre = np.zeros(dim)
    centre[0] = 4.0
    z = np.concatenate([rng.normal(centre, 1.0, (n_pos, dim)),
                        rng.normal(-centre, 1.0, (n_neg, dim))]).astype(np.float32)
    y = np.r_[np.ones(n_pos, int), np.zeros(n_neg, int)]
    labeled = np.zeros(len(y), bool)
    labeled[rng.choice(n_pos, n_labeled, replace=False)] = True
    return z, y, labeled


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pu_kmeans_recovers_blobs(seed):
    z, y, labeled = blobs(seed=seed)
    result = pu_kmeans(z, labeled, restarts=5, max_iter=50, rng=np.random.default_rng(seed))
    assert (result.labels == y).mean() >= 0.98
    assert result.labels[labeled].all()
    assert result.positive_fraction == pytest.approx(0.4, abs=0.02)


def test_labelled_positives_stay_positive_even_inside_the_negative_blob():
    z, y, labeled = blobs(seed=3)
    # mislabel-proof clamp: put five "labelled positives" deep in the negative cluster
    trap = np.flatnonzero(y == 0)[:5]
    labeled[trap] = True
    result = pu_kmeans(z, labeled, restarts=3, max_iter=50, rng=np.random.default_rng(0))
    assert result.labels[trap].all()


def test_seeded_and_deterministic():
    z, _, labeled = blobs(seed=4)
    a = pu_kmeans(z, labeled, 4, 50, np.random.default_rng(11))
    b = pu_kmeans(z, labeled, 4, 50, np.random.default_rng(11))
    assert np.array_equal(a.labels, b.labels) and a.potential == b.potential


def test_potential_is_the_kmeans_objective():
    z, _, labeled = blobs(seed=5)
    r = pu_kmeans(z, labeled, 2, 50, np.random.default_rng(0))
    pos, neg = z[r.labels == 1], z[r.labels == 0]
    naive = ((pos - pos.mean(0)) ** 2).sum() + ((neg - neg.mean(0)) ** 2).sum()
    assert r.potential == pytest.approx(float(naive), rel=1e-4)


def test_more_restarts_never_increase_the_potential():
    z, _, labeled = blobs(n_pos=300, n_neg=300, seed=6)
    one = pu_kmeans(z, labeled, 1, 50, np.random.default_rng(0)).potential
    many = pu_kmeans(z, labeled, 10, 50, np.random.default_rng(0)).potential
    assert many <= one + 1e-6


def test_prior_rank_labels_the_prior_fraction():
    z, y, labeled = blobs(seed=7)
    in_u = np.ones(len(y), bool)
    result = prior_rank(z, labeled, in_u, prior=0.4)
    assert result.labels.sum() == 600
    assert (result.labels == y).mean() >= 0.98


def test_refuses_without_labelled_positives():
    z, _, _ = blobs()
    with pytest.raises(ValueError, match="at least one labelled positive"):
        pu_kmeans(z, np.zeros(len(z), bool), 1, 10, np.random.default_rng(0))


@pytest.mark.parametrize("chunk", [7, 65_536])
def test_lloyd_steps_match_the_naive_definitions(monkeypatch, chunk):
    """The chunked half-space test and mask-product means against eq. 45's squared
    distances and plain member means, in float64."""
    import pucl.pupl.algorithms as pupl

    monkeypatch.setattr(pupl, "_CHUNK", chunk)
    rng = np.random.default_rng(3)
    z = rng.normal(size=(500, 12)).astype(np.float32)
    mu_p, mu_n = rng.normal(size=(2, 12)).astype(np.float32)
    z64 = z.astype(np.float64)
    d_p = ((z64 - mu_p) ** 2).sum(axis=1)
    d_n = ((z64 - mu_n) ** 2).sum(axis=1)
    clear = np.abs(d_p - d_n) > 1e-4  # float32 rounding may only flip exact ties
    got = pupl._closer_to_positive(z, mu_p, mu_n)
    np.testing.assert_array_equal(got[clear], (d_p <= d_n)[clear])

    positive = d_p <= d_n
    new_p, new_n = pupl._centroids(z, positive, z.sum(axis=0, dtype=np.float64), mu_n)
    np.testing.assert_allclose(new_p, z64[positive].mean(axis=0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(new_n, z64[~positive].mean(axis=0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(pupl._row_norms(z), (z64 ** 2).sum(axis=1), rtol=1e-6)


def _three_blobs(rng):
    """Unit-norm features (like the projector's): P is one blob (30%), N two blobs, one
    near P and one far away, so the lowest-potential 2-split is {P, near N} against
    {far N}."""
    sizes, angles = (300, 350, 350), (0.0, 0.6, 2.8)
    z = np.concatenate([np.array([np.cos(a), np.sin(a)]) + rng.normal(scale=0.05, size=(n, 2))
                        for a, n in zip(angles, sizes, strict=True)])
    z = (z / np.linalg.norm(z, axis=1, keepdims=True)).astype(np.float32)
    y = np.r_[np.ones(300), np.zeros(700)].astype(np.int64)
    labeled = np.zeros(len(z), dtype=bool)
    labeled[rng.choice(300, size=60, replace=False)] = True
    return z, y, labeled


def test_auto_falls_back_to_prior_rank_when_2means_disagrees_with_the_prior():
    from pucl.pupl import PSEUDO_LABELLERS, prior_rank

    rng = np.random.default_rng(0)
    z, y, labeled = _three_blobs(rng)
    in_u = np.ones(len(z), dtype=bool)
    kmeans = PSEUDO_LABELLERS.create("pu_kmeans", restarts=10, random_state=1)
    kmeans.fit(z, labeled, in_u)
    assert kmeans.fallback_ is None and kmeans.labels_.mean() == pytest.approx(0.65, abs=0.02)
    auto = PSEUDO_LABELLERS.create("auto", prior=0.3, share_tolerance=0.15, restarts=10,
                                   random_state=1).fit(z, labeled, in_u)
    assert auto.fallback_.startswith("the pseudo-labels put 0.6")
    assert "prior estimate of 0.300" in auto.fallback_ and auto.method_ == "prior_rank"
    np.testing.assert_array_equal(auto.labels_, prior_rank(z, labeled, in_u, 0.3).labels)
    assert (auto.labels_ == y).mean() > 0.99
    assert auto.degenerate_ is None  # the labels it kept are sound
    # the paper's pu_kmeans keeps its split, and says it is degenerate
    flagged = PSEUDO_LABELLERS.create("pu_kmeans", prior=0.3, restarts=10,
                                      random_state=1).fit(z, labeled, in_u)
    np.testing.assert_array_equal(flagged.labels_, kmeans.labels_)
    assert flagged.degenerate_.startswith("the pseudo-labels put 0.6")
    assert kmeans.degenerate_ is None  # without a prior only an empty class is degenerate


@pytest.mark.parametrize("share, prior, expected", [
    (0.0, None, "leave the positive class empty"),
    (1.0, 0.9, "leave the negative class empty"),
    (0.91, 0.30, "put 0.910 of U positive against a prior estimate of 0.300"),
    (0.40, 0.30, None),
    (0.91, None, None),
])
def test_degeneracy_names_an_empty_class_or_a_share_far_from_the_prior(share, prior, expected):
    from pucl.pupl.base import degeneracy

    found = degeneracy(share, prior, 0.15)
    assert found == expected if expected is None else expected in found


def test_prior_rank_flags_a_prior_that_labels_everything():
    from pucl.pupl import PSEUDO_LABELLERS

    z = np.random.default_rng(0).normal(size=(50, 3)).astype(np.float32)
    labeled = np.zeros(50, dtype=bool)
    labeled[:5] = True
    fitted = PSEUDO_LABELLERS.create("prior_rank", prior=0.999).fit(z, labeled)
    assert "negative class empty" in fitted.degenerate_


def test_auto_keeps_2means_when_it_agrees_with_the_prior():
    from pucl.pupl import PSEUDO_LABELLERS

    rng = np.random.default_rng(0)
    z = np.concatenate([rng.normal(size=(400, 2)), rng.normal(size=(600, 2)) + 8.0])
    z = z.astype(np.float32)
    labeled = np.zeros(1000, dtype=bool)
    labeled[:80] = True
    in_u = np.ones(1000, dtype=bool)
    auto = PSEUDO_LABELLERS.create("auto", prior=0.42, restarts=5, random_state=0)
    plain = PSEUDO_LABELLERS.create("pu_kmeans", restarts=5, random_state=0)
    auto.fit(z, labeled, in_u)
    assert auto.fallback_ is None and auto.method_ == "pu_kmeans"
    np.testing.assert_array_equal(auto.labels_, plain.fit_predict(z, labeled, in_u))


def _lloyd_from(z, labeled, mu_n, max_iter=100):
    """Naive clamped 2-means from (mean of the labelled, mu_n), in float64: labels and
    the potential of eq. 45."""
    z = z.astype(np.float64)
    mu_p = z[labeled].mean(axis=0)
    positive = None
    for _ in range(max_iter):
        new = (((z - mu_p) ** 2).sum(1) <= ((z - mu_n) ** 2).sum(1)) | labeled
        if positive is not None and (new == positive).all():
            break
        positive = new
        mu_p, mu_n = z[positive].mean(axis=0), z[~positive].mean(axis=0)
    pot = ((z[positive] - mu_p) ** 2).sum() + ((z[~positive] - mu_n) ** 2).sum()
    return positive, pot


def test_the_mean_start_is_one_more_run_and_wins_only_on_potential():
    """On the three blobs the D^2 draws reach the {P, near N} / {far N} split; a run
    started at U's mean is checked against a naive Lloyd from the same start, and the
    kept result is whichever potential is lower."""
    rng = np.random.default_rng(0)
    z, y, labeled = _three_blobs(rng)
    plain = pu_kmeans(z, labeled, 5, 100, np.random.default_rng(3), mean_start=False)
    both = pu_kmeans(z, labeled, 5, 100, np.random.default_rng(3), mean_start=True)
    naive, naive_pot = _lloyd_from(z, labeled, z[~labeled].astype(np.float64).mean(axis=0))
    assert both.potential <= plain.potential + 1e-6
    if both.best_restart == 5:  # the mean start won: it is the naive run's labelling
        np.testing.assert_array_equal(both.labels.astype(bool), naive)
        assert both.potential == pytest.approx(naive_pot, rel=1e-4)
    else:  # the D^2 runs are the same draws with or without it
        np.testing.assert_array_equal(both.labels, plain.labels)
        assert naive_pot >= plain.potential - 1e-3 * abs(plain.potential)


def test_the_mean_start_alone_is_the_naive_lloyd_from_the_mean_of_u():
    """No D^2 draw: the one run is Lloyd from (mean of the labelled, mean of U), checked
    against the naive float64 run on data where P and N overlap a little."""
    rng = np.random.default_rng(1)
    z = np.concatenate([rng.normal(0.0, 1.0, (600, 3)), rng.normal(2.5, 1.5, (900, 3))])
    z = z.astype(np.float32)
    labeled = np.zeros(len(z), dtype=bool)
    labeled[rng.choice(600, 60, replace=False)] = True
    alone = pu_kmeans(z, labeled, 0, 100, np.random.default_rng(0), mean_start=True)
    naive, naive_pot = _lloyd_from(z, labeled, z[~labeled].astype(np.float64).mean(axis=0))
    assert alone.best_restart == 0
    assert (alone.labels.astype(bool) != naive).sum() <= 2  # float32 ties at most
    assert alone.potential == pytest.approx(naive_pot, rel=1e-4)
