"""Semi-supervised contrastive loss with class prototypes (paper 003, section 3).

The batch is [Z^x; Z^u; Z^c]: labelled embeddings, two strong views of each unlabeled
sample, and K trainable prototypes with labels 0..K-1. Unlabeled samples take the
prototype softmax's class when it is confident (eq. 5-6) and otherwise a label of their
own (shifted past K), so their two views form SimCLR's single positive pair. The loss is
the weighted SupCon of eq. 8:

    L = 1 / sum_k lambda_k * sum_i -lambda_i / |P(i)| sum_{p in P(i)} log q_ip,
    q_ip = exp(z_i . z_p / T) / sum_{j != i} exp(z_i . z_j / T)

with per-anchor weights lambda_i by kind (eq. 9). Anchors without a positive are left
out. At T = 1, with one example and the prototypes (prototype anchors weighted 0), it is
the cross-entropy of a linear layer whose weights are the prototypes (eq. 10-11).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def weighted_supcon(z: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor,
                    temperature: float) -> torch.Tensor:
    """z [n, d] (normalised here), labels [n] int, weights [n] >= 0 -> scalar (eq. 8)."""
    if z.dim() != 2 or labels.shape != (len(z),) or weights.shape != (len(z),):
        raise ValueError(f"need z [n, d], labels [n], weights [n]; got {tuple(z.shape)}, "
                         f"{tuple(labels.shape)}, {tuple(weights.shape)}")
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    z = F.normalize(z, dim=1)
    s = z @ z.T / temperature
    eye = torch.eye(len(z), dtype=torch.bool, device=z.device)
    log_prob = s - torch.logsumexp(s.masked_fill(eye, float("-inf")), dim=1, keepdim=True)
    positive = (labels.view(-1, 1) == labels.view(1, -1)) & ~eye
    count = positive.sum(dim=1)
    has = count > 0
    per_anchor = -(log_prob * positive).sum(dim=1)[has] / count[has]
    w = weights[has].to(z.dtype)
    if w.sum() <= 0:
        return z.sum() * 0.0
    return (w * per_anchor).sum() / w.sum()


def prototype_probabilities(z_weak: torch.Tensor, prototypes: torch.Tensor,
                            temperature: float) -> torch.Tensor:
    """Eq. 6: softmax over the cosine similarities to the K prototypes, at T'."""
    sims = F.normalize(z_weak, dim=1) @ F.normalize(prototypes, dim=1).T
    return torch.softmax(sims / temperature, dim=1)


def unlabeled_targets(probs: torch.Tensor, threshold: float) -> tuple[torch.Tensor,
                                                                       torch.Tensor]:
    """Eq. 5: the confident class, or a unique label K + i. Returns (labels, confident)."""
    k = probs.shape[1]
    confidence, guess = probs.max(dim=1)
    confident = confidence > threshold
    unique = k + torch.arange(len(probs), device=probs.device)
    return torch.where(confident, guess, unique), confident


def prior_ranked_negatives(positive_prob: torch.Tensor, negative_share: float) -> torch.Tensor:
    """A PU source of negatives that paper 003 does not have (it assumes labelled
    samples of every class): the round(negative_share * n) unlabeled samples the
    prototypes find least positive. negative_share is 1 - the class prior of U, so each
    batch's pseudo-negatives are as many as U's negatives are expected to be. -> mask [n]."""
    if not 0.0 <= negative_share <= 1.0:
        raise ValueError(f"negative_share must be in [0, 1], got {negative_share}")
    count = round(negative_share * len(positive_prob))
    mask = torch.zeros(len(positive_prob), dtype=torch.bool, device=positive_prob.device)
    mask[torch.argsort(positive_prob, stable=True)[:count]] = True
    return mask
