"""KM1/KM2 against known answers, and the simplex QP against a generic solver."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize

from pucl.prior import estimate_prior, prepare_features
from pucl.prior.km2 import DistanceCurve
from pucl.prior.qp import nearest_in_hull, nearest_in_hull_lowrank

GRID = [round(0.1 * 10 ** (k / 8), 4) for k in range(17)]


def gaussian_mixture(kappa: float, n_mix: int, n_comp: int, seed: int):
    """Mixture = kappa * N(+mu, I) + (1 - kappa) * N(-mu, I); component = N(+mu, I)."""
    rng = np.random.default_rng(seed)
    mu = np.zeros(5)
    mu[0] = 2.0
    n_pos = int(round(kappa * n_mix))
    mixture = np.concatenate([rng.normal(mu, 1.0, (n_pos, 5)),
                              rng.normal(-mu, 1.0, (n_mix - n_pos, 5))])
    component = rng.normal(mu, 1.0, (n_comp, 5))
    return mixture, component


@pytest.mark.parametrize("kappa", [0.2, 0.5, 0.8])
def test_km2_recovers_known_mixture_proportion(kappa):
    mixture, component = gaussian_mixture(kappa, 800, 400, seed=1)
    est = estimate_prior(mixture, component, GRID)
    assert est.km2 == pytest.approx(kappa, abs=0.05)
    assert 0.0 <= est.km1 <= 1.0  # KM1 is reported too (it is the looser estimator)
    assert est.n_mixture == 800 and est.n_component == 400


def test_more_component_in_the_mixture_gives_a_larger_estimate():
    low = estimate_prior(*gaussian_mixture(0.3, 400, 200, seed=2), GRID).km2
    high = estimate_prior(*gaussian_mixture(0.7, 400, 200, seed=2), GRID).km2
    assert high > low + 0.25


def test_qp_matches_a_generic_solver():
    """SMO with the certified gap stops at the optimum a general NLP solver finds."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(30, 3))
    K = np.exp(-((x[:, None] - x[None]) ** 2).sum(-1) / 2.0)
    n_mix = 20
    lam = 1.6
    u = np.concatenate([np.full(n_mix, lam / n_mix), np.full(10, (1 - lam) / 10)])
    ours = nearest_in_hull(K, K @ u, float(u @ K @ u), tol=1e-12)

    def f(v):
        return (u - v) @ K @ (u - v)

    ref = minimize(f, np.full(30, 1 / 30), jac=lambda v: -2 * K @ (u - v), method="SLSQP",
                   bounds=[(0, None)] * 30,
                   constraints=[{"type": "eq", "fun": lambda v: v.sum() - 1}],
                   options={"ftol": 1e-14, "maxiter": 1000})
    assert ours.value == pytest.approx(ref.fun, abs=1e-8)
    assert ours.v.min() >= 0 and ours.v.sum() == pytest.approx(1.0)
    assert ours.gap <= 1e-12


def test_distance_is_zero_for_a_valid_distribution():
    """At lambda = 1, u is the empirical mixture itself: d(1) = 0."""
    mixture, component = gaussian_mixture(0.5, 50, 30, seed=3)
    x = np.concatenate([mixture, component])
    K = np.exp(-((x[:, None] - x[None]) ** 2).sum(-1) / 4.0)
    curve = DistanceCurve(K, 50, tol=1e-12)
    assert curve(1.0) == pytest.approx(0.0, abs=1e-5)
    assert curve(3.0) > curve(2.0) > curve(1.2)


def test_prepare_features_reduces_and_subsamples_deterministically():
    rng_data = np.random.default_rng(0)
    mixture, component = rng_data.random((500, 1, 8, 8)), rng_data.random((80, 1, 8, 8))
    a = prepare_features(mixture, component, 10, 200, np.random.default_rng(5))
    b = prepare_features(mixture, component, 10, 200, np.random.default_rng(5))
    assert a[0].shape == (200, 10) and a[1].shape == (80, 10)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


@pytest.mark.parametrize("lam", [1.1, 1.5, 3.0])
def test_nnls_and_pairwise_solvers_agree(lam):
    mixture, component = gaussian_mixture(0.4, 120, 60, seed=4)
    x = np.concatenate([mixture, component])
    K = np.exp(-((x[:, None] - x[None]) ** 2).sum(-1) / 8.0)
    exact = DistanceCurve(K, 120, tol=1e-12, solver="nnls")(lam)
    pairwise = DistanceCurve(K, 120, tol=1e-12, solver="pairwise")(lam)
    assert exact == pytest.approx(pairwise, abs=1e-5)


@pytest.mark.parametrize("seed", [0, 1])
def test_a_warm_started_nnls_reaches_the_optimum_of_all_columns(seed):
    """The NNLS started from a few columns (a nearby solution's support, a random few,
    one) ends where scipy's NNLS over every column does: the same optimal value, a
    certified gap as small."""
    mixture, component = gaussian_mixture(0.5, 160, 80, seed=seed)
    x = np.concatenate([mixture, component])
    K = np.exp(-((x[:, None] - x[None]) ** 2).sum(-1) / 2.0)
    L = DistanceCurve(K, 160, tol=1e-12, solver="nnls").factor
    rng = np.random.default_rng(seed)
    nearby = None
    for lam in (1.3, 1.25, 2.0):
        u = np.concatenate([np.full(160, lam / 160), np.full(80, (1 - lam) / 80)])
        whole = nearest_in_hull_lowrank(L, u)
        starts = [rng.choice(240, 10, replace=False), np.array([7])]
        if nearby is not None:
            starts.append(np.flatnonzero(nearby))
        for start in starts:
            warm = nearest_in_hull_lowrank(L, u, start=start)
            assert warm.value == pytest.approx(whole.value, rel=1e-9, abs=1e-13)
            assert warm.gap <= max(10 * whole.gap, 1e-12)
            assert warm.v.min() >= 0 and warm.v.sum() == pytest.approx(1.0)
        nearby = whole.v


def test_the_distance_curve_is_that_of_cold_solves_in_any_order():
    """Warm starts (each lambda from the nearest one solved before) change no value of
    d(lambda): the bisection sees the curve a cold solve at each lambda gives."""
    mixture, component = gaussian_mixture(0.3, 200, 100, seed=5)
    x = np.concatenate([mixture, component])
    K = np.exp(-((x[:, None] - x[None]) ** 2).sum(-1) / 2.0)
    lams = [1.05, 4.0, 2.2, 2.18, 1.6, 1.58, 1.3, 1.28]
    warm = DistanceCurve(K, 200, tol=1e-12, solver="nnls")
    along = [warm(lam) for lam in lams]
    cold = [DistanceCurve(K, 200, tol=1e-12, solver="nnls")(lam) for lam in lams]
    np.testing.assert_allclose(along, cold, rtol=1e-7, atol=1e-10)
