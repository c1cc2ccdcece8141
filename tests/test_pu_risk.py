"""uPU / nnPU (paper 000 eq. 14-15, Kiryo et al.'s step) against a naive implementation
written from the equations, and the baselines against naive CE on separable PU data."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from pucl.classify.linear import LinearSettings, train_linear_head, train_pu_head
from pucl.classify.pu_risk import pu_risk


def naive_risks(t_p, t_u, prior):
    """Eq. 14 and 15 term by term, float64, sigmoid loss l(t, y) = 1 / (1 + exp(y t))."""
    def loss(t, y):
        return 1.0 / (1.0 + math.exp(y * t))

    r_p_plus = sum(loss(t, +1) for t in t_p) / len(t_p)
    r_p_minus = sum(loss(t, -1) for t in t_p) / len(t_p)
    r_u_minus = sum(loss(t, -1) for t in t_u) / len(t_u)
    upu = prior * r_p_plus + (r_u_minus - prior * r_p_minus)
    nnpu = prior * r_p_plus + max(0.0, r_u_minus - prior * r_p_minus)
    return upu, nnpu, r_u_minus - prior * r_p_minus


@pytest.mark.parametrize("prior", [0.1, 0.4, 0.7])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_risks_equal_the_equations(prior, seed):
    rng = np.random.default_rng(seed)
    t_p = rng.normal(1.0, 2.0, 17)
    t_u = rng.normal(-0.5, 2.0, 40)
    upu, nnpu, negative = naive_risks(t_p, t_u, prior)
    tp, tu = torch.tensor(t_p), torch.tensor(t_u)
    assert float(pu_risk(tp, tu, prior, "upu").risk) == pytest.approx(upu, abs=1e-12)
    got = pu_risk(tp, tu, prior, "nnpu")
    assert float(got.risk) == pytest.approx(nnpu, abs=1e-12)
    assert float(got.negative_risk) == pytest.approx(negative, abs=1e-12)


def _grad(objective_fn, t_p, t_u):
    tp = torch.tensor(t_p, requires_grad=True)
    tu = torch.tensor(t_u, requires_grad=True)
    objective_fn(tp, tu).backward()
    return np.concatenate([tp.grad.numpy(), tu.grad.numpy()])


def _naive_negative(tp, tu, prior):
    return torch.sigmoid(tu).mean() - prior * torch.sigmoid(tp).mean()


def _naive_upu(tp, tu, prior):
    return prior * torch.sigmoid(-tp).mean() + _naive_negative(tp, tu, prior)


def test_kiryo_step_on_a_negative_negative_risk():
    """U scored far negative, P far positive: R_U^- - pi R_P^- < 0, so nnPU steps on
    -gamma times the negative risk, not on the risk."""
    prior, gamma = 0.4, 0.7
    t_p, t_u = np.full(5, 3.0), np.full(8, -4.0)
    result = pu_risk(torch.tensor(t_p), torch.tensor(t_u), prior, "nnpu", 0.0, gamma)
    assert result.corrected and float(result.negative_risk) < 0
    got = _grad(lambda a, b: pu_risk(a, b, prior, "nnpu", 0.0, gamma).objective, t_p, t_u)
    want = _grad(lambda a, b: -gamma * _naive_negative(a, b, prior), t_p, t_u)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("beta, corrected", [(0.0, True), (0.5, False)])
def test_beta_tolerates_a_small_negative_risk(beta, corrected):
    prior = 0.4
    t_p, t_u = np.full(5, 3.0), np.full(8, -4.0)  # negative risk about -0.37
    result = pu_risk(torch.tensor(t_p), torch.tensor(t_u), prior, "nnpu", beta)
    assert bool(result.corrected) is corrected
    got = _grad(lambda a, b: pu_risk(a, b, prior, "nnpu", beta).objective, t_p, t_u)
    if not corrected:  # inside the tolerance: the ordinary (uPU) gradient
        np.testing.assert_allclose(got, _grad(lambda a, b: _naive_upu(a, b, prior), t_p, t_u),
                                   rtol=1e-12, atol=1e-15)


def test_nonnegative_risk_steps_on_the_whole_risk():
    prior = 0.3
    rng = np.random.default_rng(5)
    t_p, t_u = rng.normal(0, 1, 9), rng.normal(1.0, 1, 30)  # U scored positive: R^- > 0
    result = pu_risk(torch.tensor(t_p), torch.tensor(t_u), prior, "nnpu")
    assert not result.corrected and float(result.negative_risk) > 0
    got = _grad(lambda a, b: pu_risk(a, b, prior, "nnpu").objective, t_p, t_u)
    np.testing.assert_allclose(got, _grad(lambda a, b: _naive_upu(a, b, prior), t_p, t_u),
                               rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.2])
def test_prior_outside_the_open_interval_is_refused(bad):
    with pytest.raises(ValueError, match="prior must be in"):
        pu_risk(torch.zeros(2), torch.zeros(2), bad, "nnpu")


def separable_pu(seed=0, n_u=2000, n_p=60, prior=0.4, dim=5):
    """Two well-separated Gaussians; P drawn from the positive one, U a mixture."""
    rng = np.random.default_rng(seed)
    shift = np.zeros(dim)
    shift[0] = 3.0

    def draw(n, positive):
        return rng.normal(0, 1, (n, dim)) + (shift if positive else -shift)

    y_u = rng.random(n_u) < prior
    x_u = np.where(y_u[:, None], draw(n_u, True), draw(n_u, False))
    x_p = draw(n_p, True)
    y_test = rng.random(2000) < prior
    x_test = np.where(y_test[:, None], draw(2000, True), draw(2000, False))
    return x_p, x_u, x_test, y_test


def test_each_pu_risk_beats_naive_ce_on_separable_data():
    x_p, x_u, x_test, y_test = separable_pu()
    settings = LinearSettings(epochs=30, lr=0.05, weight_decay=0.0, batch_size=256)

    def accuracy(head):
        return float(((head.positive_score(x_test) >= 0.5) == y_test).mean())

    naive, _ = train_linear_head(np.concatenate([x_p, x_u]),
                                 np.r_[np.ones(len(x_p)), np.zeros(len(x_u))].astype(int),
                                 settings, torch.Generator().manual_seed(0), progress=False)
    scores = {"naive_ce": accuracy(naive)}
    for kind in ("upu", "nnpu"):
        head, losses = train_pu_head(x_p, x_u, 0.4, kind, settings,
                                     torch.Generator().manual_seed(0), progress=False)
        scores[kind] = accuracy(head)
        assert np.isfinite(losses).all()
    # U-as-negative labels every positive of U negative: it can only find the majority.
    assert scores["naive_ce"] < 0.7, scores
    assert scores["upu"] > 0.95 and scores["nnpu"] > 0.95, scores


def naive_label_distribution(t_p, t_u, prior, entropy, bins=1):
    """Dist-PU's loss as its paper states it, float64, term by term: each set's
    histogram of scores s = sigmoid(t) over bin centres t_k = k / bins, with triangular
    votes max(0, 1 - |s - t_k| bins); P's against the proxy all mass at 1, U's against
    prior at 1 and 1 - prior at 0 (L1, averaged over the bins); U's term weighed
    1 / (2 prior); plus `entropy` times U's mean binary entropy."""
    def histogram(t):
        s = [1.0 / (1.0 + math.exp(-v)) for v in t]
        return [sum(max(0.0, 1.0 - abs(x - k / bins) * bins) for x in s) / len(s)
                for k in range(bins + 1)]

    def l1(h, proxy):
        return sum(abs(a - b) for a, b in zip(h, proxy, strict=True)) / len(h)

    proxy_p = [0.0] * bins + [1.0]
    proxy_u = [1.0 - prior] + [0.0] * (bins - 1) + [prior]
    s_u = [1.0 / (1.0 + math.exp(-v)) for v in t_u]
    h_u = -sum(x * math.log(x) + (1 - x) * math.log(1 - x) for x in s_u) / len(s_u)
    return (l1(histogram(t_p), proxy_p) + l1(histogram(t_u), proxy_u) / (2 * prior)
            + entropy * h_u)


@pytest.mark.parametrize("prior", [0.3, 0.7])
@pytest.mark.parametrize("entropy", [0.0, 0.002, 0.5])
@pytest.mark.parametrize("seed", [0, 1])
def test_dist_is_dist_pus_histogram_loss_with_one_bin(prior, entropy, seed):
    rng = np.random.default_rng(seed)
    t_p = rng.normal(1.0, 2.0, 19)
    t_u = rng.normal(-0.3, 2.5, 45)
    got = pu_risk(torch.tensor(t_p), torch.tensor(t_u), prior, "dist", entropy=entropy)
    expected = naive_label_distribution(t_p, t_u, prior, entropy)
    assert float(got.objective) == pytest.approx(expected, abs=1e-12)
    s_u = 1 / (1 + np.exp(-t_u))
    assert float(got.negative_risk) == pytest.approx(s_u.mean() - prior, abs=1e-12)


def test_dist_pulls_us_mean_score_to_the_prior_from_either_side():
    """The alignment term's gradient moves every U score down when U's mean score is
    above the prior and up when below; P's scores always up."""
    t_p = torch.zeros(8)
    for t_u, sign in ((torch.full((16,), 2.0), +1.0), (torch.full((16,), -2.0), -1.0)):
        grad = _grad(lambda a, b: pu_risk(a, b, 0.4, "dist").objective, t_p.numpy(),
                     t_u.numpy())
        assert (grad[:8] < 0).all()  # descending raises P's scores
        assert (np.sign(grad[8:]) == sign).all()


def test_a_dist_head_predicts_the_prior_share_of_u_on_separable_data():
    x_p, x_u, x_test, y_test = separable_pu()
    settings = LinearSettings(epochs=30, lr=0.05, weight_decay=0.0, batch_size=256)
    head, losses = train_pu_head(x_p, x_u, 0.4, "dist", settings,
                                 torch.Generator().manual_seed(0), progress=False,
                                 entropy=0.002)
    assert np.isfinite(losses).all() and losses[-1] < losses[0]
    assert float(((head.positive_score(x_test) >= 0.5) == y_test).mean()) > 0.95
    assert abs(float((head.positive_score(x_u) >= 0.5).mean()) - 0.4) < 0.03
