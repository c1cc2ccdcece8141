"""cluster_share: many k-means clusters, each labelled by pi * (its share of the labelled
positives) / (its share of U), against hand counts and against a positive class of
several far-apart shapes (where the paper's 2-means splits by shape)."""

from __future__ import annotations

import numpy as np
import pytest

from pucl.pupl import PSEUDO_LABELLERS, cluster_share, pu_kmeans


def striped(seed=0, n_labeled=120):
    """Six tight blobs on a line, P and N alternating (P at 0, 20, 40; N at 10, 30, 50):
    the positive class is three shapes, each nearer a negative blob than another positive
    one. U holds every row, the labelled positives' copies included (case-control)."""
    rng = np.random.default_rng(seed)
    sizes = (300, 700, 300, 700, 300, 700)
    centres = np.arange(6) * 10.0
    z = np.concatenate([np.c_[c + rng.normal(size=n), rng.normal(size=(n, 3))]
                        for c, n in zip(centres, sizes, strict=True)]).astype(np.float32)
    y = np.concatenate([np.full(n, 1 - i % 2) for i, n in enumerate(sizes)]).astype(np.int64)
    labeled = np.zeros(len(z), dtype=bool)
    labeled[rng.choice(np.flatnonzero(y == 1), n_labeled, replace=False)] = True
    return z, y, labeled, np.ones(len(z), dtype=bool)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_recovers_a_positive_class_of_several_shapes_where_2means_cannot(seed):
    z, y, labeled, in_u = striped(seed)
    shares = cluster_share(z, labeled, in_u, prior=0.3, clusters=12, max_iter=25,
                           restarts=3, seed=seed)
    assert (shares.labels == y).mean() >= 0.99
    two = pu_kmeans(z, labeled, restarts=10, max_iter=50, rng=np.random.default_rng(seed))
    assert (two.labels == y).mean() < 0.8  # the lowest-potential 2-split follows the line


def test_margins_are_each_clusters_positive_share_from_hand_counts():
    """With one cluster per blob the groups are the blobs; the share of a blob is
    pi * (labelled in it / all labelled) / (its rows in U / all of U), counted here by
    hand, clipped to [0, 1]; the margin is that minus one half."""
    z, y, labeled, in_u = striped(3)
    blob = np.repeat(np.arange(6), (300, 700, 300, 700, 300, 700))
    prior = 0.3
    got = cluster_share(z, labeled, in_u, prior, clusters=6, max_iter=50, restarts=5, seed=0)
    for b in range(6):
        rows = blob == b
        share = prior * (labeled & rows).sum() / labeled.sum() / ((in_u & rows).sum() / in_u.sum())
        expected = min(share, 1.0) - 0.5
        unlabelled = rows & ~labeled
        np.testing.assert_allclose(got.margin[unlabelled], expected, rtol=1e-5)
        assert got.labels[unlabelled].all() == (expected >= 0)
    assert np.isinf(got.margin[labeled]).all() and got.labels[labeled].all()


def test_a_prior_too_low_leaves_thin_positive_clusters_negative():
    """The prior decides which clusters count: at pi-hat = 0.1 every positive blob's share
    is 0.1 * (1/3) / (300/3000) = 0.33 < 1/2, so only the labelled positives stay positive."""
    z, y, labeled, in_u = striped(4)
    got = cluster_share(z, labeled, in_u, prior=0.1, clusters=6, max_iter=50, restarts=5, seed=0)
    np.testing.assert_array_equal(got.labels.astype(bool), labeled)


def test_seeded_and_deterministic_and_registered():
    z, _, labeled, in_u = striped(5)
    entry = PSEUDO_LABELLERS.get("cluster_share")
    assert entry.target.labels_with_prior
    a = entry.target(prior=0.3, clusters=10, random_state=7).fit(z, labeled, in_u)
    b = entry.target(prior=0.3, clusters=10, random_state=7).fit(z, labeled, in_u)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    assert a.method_ == "cluster_share" and a.degenerate_ is None


@pytest.mark.parametrize("prior", [0.0, 1.0, -0.2])
def test_refuses_a_prior_outside_the_open_unit_interval(prior):
    z, _, labeled, in_u = striped(6)
    with pytest.raises(ValueError, match="prior must be in"):
        cluster_share(z, labeled, in_u, prior, clusters=4, max_iter=5, restarts=1, seed=0)


@pytest.mark.parametrize("n_labeled, expected", [(10, 2), (300, 15), (900, 45), (5000, 100)])
def test_auto_gives_one_cluster_per_twenty_labelled_positives(n_labeled, expected):
    from pucl.pupl.cluster_share import clusters_for

    labeled = np.zeros(6000, dtype=bool)
    labeled[:n_labeled] = True
    assert clusters_for("auto", labeled) == expected
    assert clusters_for(7, labeled) == 7
