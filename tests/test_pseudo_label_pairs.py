"""Fine-tuning's pseudo-label pair term against NoiSNCL written pair by pair from paper 001
eq. 7, and the dist_pu_pairs objective end to end on a tiny fine-tuning."""

from __future__ import annotations

import math

import pytest
import torch

from pucl.classify.finetune import pseudo_label_pairs


def naive_pairs(features: torch.Tensor, scores: torch.Tensor, n_p: int) -> float:
    """Eq. 7 for every ordered pair i != j of one pseudo-label (labelled rows positive, U by
    the sign of its score), averaged over each anchor's pairs, then over anchors that have one."""
    label = [True] * n_p + [bool(s > 0) for s in scores[n_p:].tolist()]
    anchors = []
    for i in range(len(label)):
        pair_losses = []
        for j in range(len(label)):
            if i == j or label[i] != label[j]:
                continue
            cos = torch.nn.functional.cosine_similarity(features[i], features[j], dim=0).item()
            cos = min(max(cos, 1e-4), 1 - 1e-4)
            pair_losses.append(2 * math.sqrt(1 - cos))
        if pair_losses:
            anchors.append(sum(pair_losses) / len(pair_losses))
    return sum(anchors) / len(anchors)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_pair_term_is_noisncl_over_rows_of_one_pseudo_label(seed):
    generator = torch.Generator().manual_seed(seed)
    features = torch.randn(12, 5, generator=generator)
    scores = torch.randn(12, generator=generator)
    got = pseudo_label_pairs(features, scores, n_p=4).item()
    assert got == pytest.approx(naive_pairs(features, scores, 4), rel=1e-5)


def test_rows_already_together_cost_almost_nothing_and_only_labels_split_them():
    same = torch.ones(6, 3)  # every row the same direction
    scores = torch.tensor([0.0, 0.0, 1.0, -1.0, 2.0, -2.0])
    assert pseudo_label_pairs(same, scores, n_p=2).item() == pytest.approx(0.02, abs=1e-3)
    # two directions, each held by one pseudo-label: no pair crosses, so still nothing
    split = torch.tensor([[1.0, 0, 0]] * 2 + [[1.0, 0, 0], [0, 1.0, 0]] * 2)
    assert pseudo_label_pairs(split, scores, n_p=2).item() == pytest.approx(0.02, abs=1e-3)
    # the same rows with U's calls flipped: every pair of a label now mixes the two
    assert pseudo_label_pairs(split, -scores, n_p=2).item() > 0.5


def test_the_gradient_pulls_a_row_towards_its_label_and_not_through_the_targets():
    features = torch.tensor([[1.0, 0.0], [1.0, 1.0], [1.0, 0.1]], requires_grad=True)
    scores = torch.tensor([0.0, 1.0, -1.0])  # rows 0, 1 positive (one labelled), row 2 not
    pseudo_label_pairs(features, scores, n_p=1).backward()
    grad = features.grad
    assert grad[2].abs().sum() == 0  # row 2 has no pair of its label
    # a descent step (minus the gradient) turns row 0 up towards row 1 and row 1 down to 0
    assert grad[0, 1] < 0 and grad[1, 1] > 0


@pytest.mark.parametrize(("name", "kind"), [("dist_pu_pairs", "dist")])
def test_the_pair_objectives_hand_their_weight_and_risk_to_the_fine_tuning(name, kind):
    """params -> the registry entry -> what finetune() receives: the head's own risk and
    the pair weight of its settings (the default 2.0, or the one asked for)."""
    from pucl.classify.objectives import CLASSIFIER_OBJECTIVES

    entry = CLASSIFIER_OBJECTIVES.get(name)
    assert entry.settings({}, f"classifier.{name}").pairs == 2.0
    objective = CLASSIFIER_OBJECTIVES.create(name, pairs=0.5)
    assert (objective.kind, objective.pairs) == (kind, 0.5)
    assert CLASSIFIER_OBJECTIVES.create(name[:-len("_pairs")]).pairs == 0.0
