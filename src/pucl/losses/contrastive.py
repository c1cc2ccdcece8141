"""Contrastive objectives as torch modules: forward(z1, z2, is_labeled) -> scalar.

z1, z2: [b, d] projector outputs of the two views (not normalised); is_labeled: bool [b]
marking labelled positives. Formulas: docs/objectives.md; paper 000 eq. 22 (ssCL), 25
(sCL-PU), 28 (MCL), 29 (PUCL), 37-39 (PUNCE), 41-42 (DCL, Chuang et al.'s estimator);
paper 002 eq. 17 (balanced); paper 004 eq. 6-7 (non-negative projections).
"""

from __future__ import annotations

import torch
from pydantic import Field
from torch import nn

from pucl.errors import ParamsError
from pucl.losses.core import (
    info_nce,
    partner_index,
    partner_mask,
    row_normalize,
    same_set_mask,
    similarity_logits,
)
from pucl.registry import EntryParams, Registry

# `pretrain.loss`; entries tagged needs_prior take the class prior as `pi`
CONTRASTIVE_LOSSES = Registry("contrastive loss", "pucl.losses")


def _check_prior(pi: float) -> float:
    if not 0.0 <= pi < 1.0:
        raise ValueError(f"pi must be in [0, 1), got {pi}")
    return float(pi)


def pucl_positives(labeled_views: torch.Tensor, b: int) -> torch.Tensor:
    """Labelled anchor: every other labelled view; unlabeled anchor: its other view."""
    partner = partner_mask(b, labeled_views.device)
    return torch.where(labeled_views.view(-1, 1), same_set_mask(labeled_views), partner)


def sclpu_positives(labeled_views: torch.Tensor, b: int) -> torch.Tensor:
    """Labelled anchor: every other labelled view; unlabeled anchor: every other unlabeled."""
    return torch.where(labeled_views.view(-1, 1), same_set_mask(labeled_views),
                       same_set_mask(~labeled_views))


class ContrastiveLoss(nn.Module):
    def __init__(self, temperature: float = 0.5):
        super().__init__()
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        self.temperature = float(temperature)

    def _inputs(self, z1, z2, is_labeled):
        b = z1.shape[0]
        if is_labeled.shape != (b,):
            raise ValueError(f"is_labeled must be [b] = [{b}], got {tuple(is_labeled.shape)}")
        return similarity_logits(z1, z2, self.temperature), b, is_labeled.to(torch.bool).repeat(2)

    def attraction(self, labeled_views: torch.Tensor, b: int) -> torch.Tensor:
        """Bool [2b, 2b]: which j attract anchor i (averaged per row)."""
        raise NotImplementedError

    def weights(self, labeled_views: torch.Tensor, b: int, dtype: torch.dtype) -> torch.Tensor:
        """Row-stochastic attraction weights W [2b, 2b] (zero diagonal)."""
        return row_normalize(self.attraction(labeled_views, b), dtype)

    def forward(self, z1: torch.Tensor, z2: torch.Tensor, is_labeled: torch.Tensor) -> torch.Tensor:
        s, b, labeled_views = self._inputs(z1, z2, is_labeled)
        return info_nce(s, self.weights(labeled_views, b, s.dtype))


@CONTRASTIVE_LOSSES.register("sscl")
class SSCL(ContrastiveLoss):
    """SimCLR (eq. 22): every anchor is attracted to its other view only."""

    def attraction(self, labeled_views: torch.Tensor, b: int) -> torch.Tensor:
        return partner_mask(b, labeled_views.device)


@CONTRASTIVE_LOSSES.register("pucl")
class PUCL(ContrastiveLoss):
    """PUCL (eq. 29): a labelled positive is attracted to every other labelled-positive
    view in the batch (its own other view included); an unlabeled anchor to its other
    view only. Without labelled positives in the batch it is exactly ssCL."""

    def attraction(self, labeled_views: torch.Tensor, b: int) -> torch.Tensor:
        return pucl_positives(labeled_views, b)


@CONTRASTIVE_LOSSES.register("scl_pu")
class SCLPU(ContrastiveLoss):
    """sCL-PU (eq. 25): U is taken for the negative class, so a labelled anchor attracts
    the other labelled views and an unlabeled anchor every other unlabeled view."""

    def attraction(self, labeled_views: torch.Tensor, b: int) -> torch.Tensor:
        return sclpu_positives(labeled_views, b)


class MCLParams(EntryParams):
    mcl_lambda: float = Field(0.5, ge=0.0, le=1.0, description="weight of sCL-PU; ssCL "
                              "gets 1 - it")


class BalancedParams(EntryParams):
    alpha: float = Field(2.0, gt=0.0, description="scale of the cosine similarities")
    balance_lambda: float = Field(1.0, gt=0.0, description="weight of the repulsion")


@CONTRASTIVE_LOSSES.register("mcl", params=MCLParams)
class MCL(ContrastiveLoss):
    """MCL (eq. 28): lambda * sCL-PU + (1 - lambda) * ssCL; both share log Z, so the mix
    is a mix of attraction weights."""

    def __init__(self, temperature: float = 0.5, mcl_lambda: float = 0.5):
        super().__init__(temperature)
        if not 0.0 <= mcl_lambda <= 1.0:
            raise ValueError(f"mcl_lambda must be in [0, 1], got {mcl_lambda}")
        self.mcl_lambda = float(mcl_lambda)

    def weights(self, labeled_views, b, dtype):
        supervised = sclpu_positives(labeled_views, b)
        return (self.mcl_lambda * row_normalize(supervised, dtype)
                + (1.0 - self.mcl_lambda) * row_normalize(partner_mask(b, labeled_views.device),
                                                          dtype))


@CONTRASTIVE_LOSSES.register("punce", tags=("needs_prior",))
class PUNCE(ContrastiveLoss):
    """PUNCE (eq. 37-39): labelled anchors as PUCL; an unlabeled anchor is positive with
    probability pi (attracting every labelled view and its own other view) and negative
    otherwise (its other view only). Eq. 38's "(1 - pi) log(z_i . z_a(i))" is read as
    (1 - pi) s_{i,a(i)} (docs/objectives.md)."""

    def __init__(self, temperature: float = 0.5, pi: float = 0.5):
        super().__init__(temperature)
        self.pi = _check_prior(pi)

    def weights(self, labeled_views, b, dtype):
        partner = partner_mask(b, labeled_views.device).to(dtype)
        positives_u = row_normalize(labeled_views.view(1, -1) | partner.bool(), dtype)
        unlabeled_rows = self.pi * positives_u + (1.0 - self.pi) * partner
        labeled_rows = row_normalize(same_set_mask(labeled_views), dtype)
        return torch.where(labeled_views.view(-1, 1), labeled_rows, unlabeled_rows)


@CONTRASTIVE_LOSSES.register("dcl", tags=("needs_prior",))
class DCL(ContrastiveLoss):
    """Debiased contrastive loss (eq. 41-42, Chuang et al. 2020):
    -log( e^{s_ia} / (e^{s_ia} + Ng) ),
    Ng = max( (sum_{j not in {i, a(i)}} e^{s_ij} - pi N e^{s_ia}) / (1 - pi), N e^{-1/tau} ),
    N = 2b - 2, all in log-space. Labels are not used."""

    def __init__(self, temperature: float = 0.5, pi: float = 0.5):
        super().__init__(temperature)
        self.pi = _check_prior(pi)

    def forward(self, z1, z2, is_labeled):
        s, b, _ = self._inputs(z1, z2, is_labeled)
        n = 2 * b - 2
        partner = partner_mask(b, s.device)
        eye = torch.eye(2 * b, dtype=torch.bool, device=s.device)
        # row i holds s_{i, a(i)}: a gather, not a boolean mask, whose size the host must
        # read (a step that waits for the host cannot be recorded as a CUDA graph)
        s_pos = s.gather(1, partner_index(b, s.device).view(-1, 1)).squeeze(1)
        log_neg = torch.logsumexp(s.masked_fill(eye | partner, float("-inf")), dim=1)
        shift = torch.maximum(log_neg, s_pos).detach()
        debiased = (torch.exp(log_neg - shift) - self.pi * n * torch.exp(s_pos - shift)) / (
            1.0 - self.pi)
        floor = n * torch.exp(-1.0 / self.temperature - shift)
        log_ng = shift + torch.log(torch.maximum(debiased, floor))
        return -(s_pos - torch.logaddexp(s_pos, log_ng)).mean()


@CONTRASTIVE_LOSSES.register("balanced", params=BalancedParams)
class Balanced(ContrastiveLoss):
    """Balanced contrastive loss (paper 002 eq. 17) on cosine similarities:
    l_i = -mean_{j in pos(i)} cos_ij + lambda / alpha * log sum_{j in neg(i)} exp(alpha cos_ij),
    pos(i) = the other view (`balanced`) or PUCL's positive set (`balanced_pucl`),
    neg(i) = every other view (an anchor without negatives repels nothing). The temperature
    is not used (alpha plays its part)."""

    def __init__(self, alpha: float = 2.0, balance_lambda: float = 1.0, pu: bool = False,
                 temperature: float = 1.0):
        super().__init__(temperature)
        if not alpha > 0 or not balance_lambda > 0:
            raise ValueError(f"alpha and balance_lambda must be > 0, got {alpha}, "
                             f"{balance_lambda}")
        self.alpha, self.balance_lambda, self.pu = float(alpha), float(balance_lambda), pu

    def forward(self, z1, z2, is_labeled):
        b = z1.shape[0]
        if is_labeled.shape != (b,):
            raise ValueError(f"is_labeled must be [b] = [{b}], got {tuple(is_labeled.shape)}")
        cos = similarity_logits(z1, z2, 1.0)
        labeled_views = is_labeled.to(torch.bool).repeat(2)
        positive = pucl_positives(labeled_views, b) if self.pu else partner_mask(b, cos.device)
        eye = torch.eye(2 * b, dtype=torch.bool, device=cos.device)
        attract = (row_normalize(positive, cos.dtype) * cos).sum(dim=1)
        negative = ~(eye | positive)
        repel = torch.logsumexp((self.alpha * cos).masked_fill(~negative, float("-inf")), dim=1)
        # an anchor with no negative in the batch (all views labelled) has nothing to repel
        repel = torch.where(negative.any(dim=1), repel, torch.zeros_like(repel))
        return (-attract + self.balance_lambda / self.alpha * repel).mean()


@CONTRASTIVE_LOSSES.register("balanced_pucl", params=BalancedParams, params_key="balanced")
class BalancedPUCL(Balanced):
    """Balanced loss (paper 002 eq. 17) with PUCL's positive set for labelled anchors."""

    def __init__(self, alpha: float = 2.0, balance_lambda: float = 1.0,
                 temperature: float = 1.0):
        super().__init__(alpha, balance_lambda, True, temperature)


def make_loss(name: str, **params) -> ContrastiveLoss:
    """The objective `name` with its params (temperature, and mcl_lambda for mcl,
    pi for punce and dcl, alpha / balance_lambda for the balanced forms)."""
    try:
        cls = CONTRASTIVE_LOSSES.get(name).target
    except ParamsError as exc:
        raise ValueError(str(exc)) from None
    try:
        return cls(**params)
    except TypeError as exc:
        raise ValueError(f"invalid params for loss '{name}': {exc}") from None
