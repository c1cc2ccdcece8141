"""Dist-PU's mixup term (pucl.classify.mixup) against the authors' two-target form written
term by term, its soft labels, and the Dist-PU heads' fine-tuning with it on."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from pucl.classify.finetune import FinetuneSettings, finetune
from pucl.classify.mixup import MixupSettings, SoftLabels, mixup_draws, mixup_loss
from tests.test_finetune import IDENTITY, corner_images, random_start


class LinearScore(nn.Module):
    """A head whose score is one linear map (what LinearHead.score gives a 2-class head)."""

    def __init__(self, d: int):
        super().__init__()
        self.w = nn.Linear(d, 1)

    def score(self, h: torch.Tensor) -> torch.Tensor:
        return self.w(h).squeeze(1)


def naive_mixup(head, views, targets, lam, perm, settings) -> float:
    """weight * [lam BCE(s, y_a) + (1 - lam) BCE(s, y_b)] + entropy * H(s), row by row,
    with s the probability of the mixed row (the authors' mixup_bce and loss_entropy)."""
    bce_a, bce_b, ent = [], [], []
    for i in range(len(views)):
        x = lam * views[i] + (1 - lam) * views[perm[i]]
        s = torch.sigmoid(head.score(x[None])).item()
        y_a, y_b = targets[i].item(), targets[perm[i]].item()
        bce_a.append(-(y_a * math.log(s) + (1 - y_a) * math.log(1 - s)))
        bce_b.append(-(y_b * math.log(s) + (1 - y_b) * math.log(1 - s)))
        ent.append(-(s * math.log(s) + (1 - s) * math.log(1 - s)))
    mean = lambda v: sum(v) / len(v)  # noqa: E731
    return (settings.weight * (lam * mean(bce_a) + (1 - lam) * mean(bce_b))
            + settings.entropy * mean(ent))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_mixup_term_is_the_authors_two_target_bce_with_entropy(seed):
    generator = torch.Generator().manual_seed(seed)
    views = torch.randn(10, 4, generator=generator)
    targets = torch.rand(10, generator=generator)
    torch.manual_seed(seed)
    head = LinearScore(4)
    settings = MixupSettings(weight=5.0, alpha=6.0, entropy=0.04)
    lam, perm = mixup_draws(10, settings, generator, np.random.default_rng(seed))
    got = mixup_loss(nn.Identity(), head, views, targets, lam, perm, settings).item()
    assert 0.0 < lam.item() < 1.0 and sorted(perm.tolist()) == list(range(10))
    assert got == pytest.approx(naive_mixup(head, views, targets, lam.item(), perm, settings),
                                rel=1e-5)


def test_lam_follows_beta_alpha_alpha():
    settings = MixupSettings(weight=1.0, alpha=6.0)
    rng, generator = np.random.default_rng(0), torch.Generator().manual_seed(0)
    lams = np.array([mixup_draws(4, settings, generator, rng)[0].item() for _ in range(4000)])
    # Beta(6, 6): mean 1/2, variance 1 / (4 (2 alpha + 1)) = 1/52
    assert lams.mean() == pytest.approx(0.5, abs=0.01)
    assert lams.var() == pytest.approx(1 / 52, rel=0.08)


def test_soft_labels_keep_labelled_rows_at_one_and_follow_the_others_scores():
    soft = SoftLabels(torch.tensor([0.2, 0.4, 0.6, 0.8]), labelled=torch.tensor([1]))
    assert soft.values.tolist() == pytest.approx([0.2, 1.0, 0.6, 0.8])
    soft.update(torch.tensor([0, 1, 3]), torch.tensor([0.0, -5.0, math.log(3.0)]))
    assert soft.values.tolist() == pytest.approx([0.5, 1.0, 0.6, 0.75])


def _dist_finetune(x, positive, unlabeled, mixup):
    encoder, head = random_start(x)
    losses = finetune(encoder, head, x, FinetuneSettings(2, 1e-3, 0.0, 32), IDENTITY,
                      torch.Generator().manual_seed(0), torch.device("cpu"),
                      positive=positive, unlabeled=unlabeled, kind="dist", prior=0.5,
                      progress=False, entropy=0.002, mixup=mixup)
    return losses, {k: v.clone() for k, v in encoder.state_dict().items()}


def test_fine_tuning_with_mixup_is_seeded_and_changes_what_is_learnt():
    x, y = corner_images(160, np.random.default_rng(0))
    positive = torch.nonzero(y == 1).squeeze(1)[:30]
    unlabeled = torch.arange(len(x))
    settings = MixupSettings(weight=5.0)
    first, weights = _dist_finetune(x, positive, unlabeled, settings)
    again, weights_again = _dist_finetune(x, positive, unlabeled, settings)
    plain, weights_plain = _dist_finetune(x, positive, unlabeled, None)
    assert first == again and all(torch.equal(weights[k], weights_again[k]) for k in weights)
    assert len(first) == 2 and all(math.isfinite(v) for v in first)
    assert any(not torch.equal(weights[k], weights_plain[k]) for k in weights)


def test_the_dist_pu_heads_take_mixup_from_their_settings_and_refuse_a_negative_weight():
    from pucl.classify.objectives import CLASSIFIER_OBJECTIVES
    from pucl.errors import ParamsError

    for name in ("dist_pu", "dist_pu_pairs"):
        entry = CLASSIFIER_OBJECTIVES.get(name)
        assert CLASSIFIER_OBJECTIVES.create(name, **dict(entry.settings(
            {}, f"classifier.{name}"))).mixup is None  # off by default
        tuned = CLASSIFIER_OBJECTIVES.create(name, **dict(entry.settings(
            {"mixup": 5.0}, f"classifier.{name}")))
        assert tuned.mixup == MixupSettings(5.0, 6.0, 0.04)
        with pytest.raises(ParamsError, match=rf"classifier\.{name}\.mixup"):
            entry.settings({"mixup": -1.0}, f"classifier.{name}")
