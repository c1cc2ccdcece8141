"""The machinery every InfoNCE-family objective shares.

A multi-viewed batch of b samples has 2b views: rows 0..b-1 are view 1, rows b..2b-1
view 2, so the other view of i is a(i) = (i + b) mod 2b. With s_ij = z_i . z_j / tau on
L2-normalised projections, every objective of docs/objectives.md is

    L = -mean_i [ sum_j W_ij s_ij - log sum_{j != i} exp(s_ij) ]

for a row-stochastic attraction matrix W with zero diagonal. Objectives differ only in W,
so all of them run on one similarity matrix and one logsumexp (log-space, max-shifted),
with no Python loop over anchors.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def similarity_logits(z1: torch.Tensor, z2: torch.Tensor, temperature: float) -> torch.Tensor:
    """[b, d] x 2 (not normalised) -> s = [2b, 2b] cosine similarities / tau."""
    if z1.shape != z2.shape or z1.dim() != 2:
        raise ValueError(f"z1 and z2 must both be [b, d], got {tuple(z1.shape)} and "
                         f"{tuple(z2.shape)}")
    z = F.normalize(torch.cat([z1, z2], dim=0), dim=1)
    return z @ z.T / temperature


def partner_index(b: int, device: torch.device | None = None) -> torch.Tensor:
    """Long [2b]: a(i), the other view of view i."""
    return (torch.arange(2 * b, device=device) + b) % (2 * b)


def partner_mask(b: int, device: torch.device | None = None) -> torch.Tensor:
    """Bool [2b, 2b]: True at (i, a(i))."""
    return torch.arange(2 * b, device=device).view(-1, 1) == partner_index(b, device).view(1, -1)


def same_set_mask(member: torch.Tensor) -> torch.Tensor:
    """Bool [2b, 2b]: True where i != j and both are members (member: bool [2b])."""
    n = member.shape[0]
    eye = torch.eye(n, dtype=torch.bool, device=member.device)
    return member.view(-1, 1) & member.view(1, -1) & ~eye


def row_normalize(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Bool mask -> weights that average over each row's True entries (empty rows -> 0)."""
    w = mask.to(dtype)
    return w / w.sum(dim=1, keepdim=True).clamp_min(1.0)


def log_partition(s: torch.Tensor) -> torch.Tensor:
    """log Z_i = log sum_{j != i} exp(s_ij), numerically stable."""
    eye = torch.eye(s.shape[0], dtype=torch.bool, device=s.device)
    return torch.logsumexp(s.masked_fill(eye, float("-inf")), dim=1)


def info_nce(s: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """-mean_i [ sum_j W_ij s_ij - log Z_i ]; W must have a zero diagonal."""
    attraction = (weights * s).sum(dim=1)
    return -(attraction - log_partition(s)).mean()
