"""Dist-PU's mixup term (pucl.classify.mixup) against the authors' loss written term by
term, its Beta draws against the distribution's known moments, and the dist_pu_mixup
objective end to end on a tiny fine-tuning."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from pucl.classify.mixup import Mixup, beta_draws, mixup_term


def naive_mixup(weights: torch.Tensor, views: torch.Tensor, n_p: int, perm: list[int],
                lam: float, mixup: Mixup) -> float:
    """The authors' phase-two terms row by row, for a linear network x -> x . w: the
    cross-entropy of the mixed row's probability to each of the two rows' soft labels,
    weighted lam and 1 - lam, plus the mixed probabilities' entropy."""
    n = len(views)
    scores = [float(views[i] @ weights) for i in range(n)]
    labels = [1.0] * n_p + [1 / (1 + math.exp(-s)) for s in scores[n_p:]]

    def bce(p: float, t: float) -> float:
        return -(t * math.log(p) + (1 - t) * math.log(1 - p))

    cross, entropy = 0.0, 0.0
    for i in range(n):
        mixed = lam * views[i] + (1 - lam) * views[perm[i]]
        p = 1 / (1 + math.exp(-float(mixed @ weights)))
        cross += lam * bce(p, labels[i]) + (1 - lam) * bce(p, labels[perm[i]])
        entropy += bce(p, p)  # a probability's entropy is its cross-entropy to itself
    return mixup.weight * cross / n + mixup.entropy * entropy / n


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_mixup_term_is_the_authors_loss(seed):
    generator = torch.Generator().manual_seed(seed)
    views = torch.randn(10, 4, generator=generator, dtype=torch.float64)
    weights = torch.randn(4, generator=generator, dtype=torch.float64)
    perm = torch.randperm(10, generator=generator)
    lam, mixup = 0.37, Mixup(weight=2.0, alpha=6.0, entropy=0.1)
    got = mixup_term(lambda v: v @ weights, views, views @ weights, 3, perm,
                     torch.tensor(lam, dtype=torch.float64), mixup)
    assert got.item() == pytest.approx(naive_mixup(weights, views, 3, perm.tolist(), lam,
                                                   mixup), rel=1e-6)


def test_no_gradient_reaches_the_pseudo_labels():
    views, weights = torch.randn(6, 3), torch.randn(3, requires_grad=True)
    scores = torch.randn(6, requires_grad=True)  # what the pseudo-labels are read from
    loss = mixup_term(lambda v: v @ weights, views, scores, 2, torch.arange(6).flip(0),
                      torch.tensor(0.3), Mixup())
    loss.backward()
    assert scores.grad is None and weights.grad.abs().sum() > 0


@pytest.mark.parametrize("alpha", [1.0, 6.0])
def test_the_mixing_weights_follow_beta_alpha_alpha(alpha):
    draws = beta_draws(alpha, 4000, torch.Generator().manual_seed(0)).numpy()
    assert draws.min() > 0 and draws.max() < 1
    # Beta(a, a): mean 1/2, variance 1 / (4 (2a + 1)); a KS test against its CDF
    assert draws.mean() == pytest.approx(0.5, abs=0.01)
    assert draws.var() == pytest.approx(1 / (4 * (2 * alpha + 1)), rel=0.08)
    assert stats.kstest(draws, stats.beta(alpha, alpha).cdf).pvalue > 0.01
    again = beta_draws(alpha, 4000, torch.Generator().manual_seed(0)).numpy()
    assert np.array_equal(draws, again)  # the seed decides every draw


def test_dist_pu_mixup_learns_a_table_from_p_and_u_and_repeats():
    """End to end through the estimator: two separated classes, a third of the positives
    labelled, the prior given; the same seed gives the same model."""
    from pucl import PUClassifier

    rng = np.random.default_rng(0)
    y = (rng.random(600) < 0.4).astype(int)
    x = rng.normal(size=(600, 5)) + 2.5 * y[:, None]
    s = np.zeros(600, int)
    s[rng.choice(np.flatnonzero(y == 1), int(y.sum()) // 3, replace=False)] = 1

    def fit():
        return PUClassifier(prior=float(y.mean()), objective="dist_pu_mixup", epochs=5,
                            finetune_epochs=10, progress=False,
                            settings={"classifier.dist_pu_mixup.mixup": 1.0}).fit(x, s)

    first = fit()
    assert (first.predict(x) == y).mean() >= 0.9
    np.testing.assert_array_equal(first.decision_function(x), fit().decision_function(x))


def test_the_mixup_objective_hands_its_settings_to_the_fine_tuning(monkeypatch):
    """params -> the registry entry -> what finetune() receives."""
    from pucl.classify import finetune as finetune_module
    from pucl.classify.objectives import CLASSIFIER_OBJECTIVES

    entry = CLASSIFIER_OBJECTIVES.get("dist_pu_mixup")
    defaults = entry.settings({}, "classifier.dist_pu_mixup")
    assert (defaults.mixup, defaults.mixup_alpha, defaults.mixup_entropy) == (5.0, 6.0, 0.04)
    received = {}
    monkeypatch.setattr(finetune_module, "finetune",
                        lambda *args, **kwargs: received.update(kwargs) or [])
    objective = CLASSIFIER_OBJECTIVES.create("dist_pu_mixup", mixup=0.5, mixup_alpha=2.0)
    targets = objective.targets(_rows(), 0.4)
    objective.finetune(None, None, None, targets, None, None, None, None, False)
    assert received["kind"] == "dist" and received["mixup"] == Mixup(0.5, 2.0, 0.04)
    assert CLASSIFIER_OBJECTIVES.create("dist_pu").mixup is None


def _rows():
    from pucl.classify.objectives import TrainingRows

    labelled = np.array([True, True, False, False, False])
    return TrainingRows(np.arange(5), labelled, np.ones(5, dtype=bool))
