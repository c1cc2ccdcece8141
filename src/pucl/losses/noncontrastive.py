"""Supervised non-contrastive losses of NcPU (paper 001, section 3.1).

Online embeddings q (after the predictor) are pulled towards target-network embeddings k
of same-class samples; nothing is pushed apart, so no negatives are needed. With
s_ij = <q_i / |q_i|, k_j / |k_j|>:

  NoiSNCL, eq. 7:  L~_r(i, j) = 2 sqrt(1 - s_ij)   for y_i = y_j

(supervised BYOL, eq. 5, is the same without the root). The square root makes a pair's
gradient grow with its similarity (eq. 8), so clean same-class pairs, already close,
outweigh noisy ones. Similarities are clamped to
[1e-4, 1 - 1e-4] (docs/objectives.md) to keep the root differentiable. The batch loss is
eq. 14's third term: the mean over anchors that have a same-class pair of the mean over
those pairs. The target side carries no gradient (BYOL's stop-gradient).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

SIMILARITY_CLAMP = (1e-4, 1.0 - 1e-4)


def _pair_mean(pair_loss: torch.Tensor, same_class: torch.Tensor) -> torch.Tensor:
    """The mean over anchors with a pair of the mean over their pairs; 0 (graph kept) when
    no anchor has one. Masks and clamps instead of indexing: no value is read back to the
    host and every shape is fixed, so a step with this loss can be a CUDA graph."""
    weights = same_class.to(pair_loss.dtype)
    per_anchor = weights.sum(dim=1)
    has_pair = (per_anchor > 0).to(pair_loss.dtype)
    anchor_loss = (pair_loss * weights).sum(dim=1) / per_anchor.clamp_min(1.0)
    return (anchor_loss * has_pair).sum() / has_pair.sum().clamp_min(1.0)


def pair_similarity(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """[b, d] online x [m, d] target -> clamped cosine similarities [b, m]; k detached."""
    if q.dim() != 2 or k.dim() != 2 or q.shape[1] != k.shape[1]:
        raise ValueError(f"q and k must be [b, d] and [m, d], got {tuple(q.shape)} and "
                         f"{tuple(k.shape)}")
    s = F.normalize(q, dim=1) @ F.normalize(k.detach(), dim=1).T
    return s.clamp(*SIMILARITY_CLAMP)


def noisncl_loss(q: torch.Tensor, k: torch.Tensor, same_class: torch.Tensor) -> torch.Tensor:
    """NoiSNCL (eq. 7) averaged as in eq. 14. same_class: bool [b, m], True where the
    pseudo-labels agree (including i's own other view when it is among the targets)."""
    return _pair_mean(2.0 * torch.sqrt(1.0 - pair_similarity(q, k)), same_class)
