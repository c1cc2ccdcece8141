"""Contrastive objectives as torch modules: forward(z1, z2, is_labeled) -> scalar.

z1, z2: [b, d] projector outputs of the two views (not normalised); is_labeled: bool [b]
marking labelled positives. Formulas: DESIGN section 4, paper 000 eq. 22 and eq. 29.
"""

from __future__ import annotations

import torch
from torch import nn

from pucl.losses.core import (
    info_nce,
    partner_mask,
    row_normalize,
    same_set_mask,
    similarity_logits,
)


class ContrastiveLoss(nn.Module):
    def __init__(self, temperature: float = 0.5):
        super().__init__()
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        self.temperature = float(temperature)

    def attraction(self, labeled_views: torch.Tensor, b: int) -> torch.Tensor:
        """Bool [2b, 2b]: which j attract anchor i (averaged per row)."""
        raise NotImplementedError

    def forward(self, z1: torch.Tensor, z2: torch.Tensor, is_labeled: torch.Tensor) -> torch.Tensor:
        s = similarity_logits(z1, z2, self.temperature)
        b = z1.shape[0]
        if is_labeled.shape != (b,):
            raise ValueError(f"is_labeled must be [b] = [{b}], got {tuple(is_labeled.shape)}")
        labeled_views = is_labeled.to(torch.bool).repeat(2)
        return info_nce(s, row_normalize(self.attraction(labeled_views, b), s.dtype))


class SSCL(ContrastiveLoss):
    """SimCLR (eq. 22): every anchor is attracted to its other view only."""

    def attraction(self, labeled_views: torch.Tensor, b: int) -> torch.Tensor:
        return partner_mask(b, labeled_views.device)


class PUCL(ContrastiveLoss):
    """PUCL (eq. 29): a labelled positive is attracted to every other labelled-positive
    view in the batch (its own other view included); an unlabeled anchor to its other
    view only. Without labelled positives in the batch it is exactly ssCL."""

    def attraction(self, labeled_views: torch.Tensor, b: int) -> torch.Tensor:
        partner = partner_mask(b, labeled_views.device)
        among_p = same_set_mask(labeled_views)
        return torch.where(labeled_views.view(-1, 1), among_p, partner)


LOSSES: dict[str, type[ContrastiveLoss]] = {"sscl": SSCL, "pucl": PUCL}


def make_loss(name: str, **params) -> ContrastiveLoss:
    try:
        cls = LOSSES[name]
    except KeyError:
        raise ValueError(
            f"unknown loss '{name}' (allowed: {', '.join(sorted(LOSSES))})"
        ) from None
    return cls(**params)
