"""Cost-sensitive PU risks for the downstream classifier (paper 000 eq. 14-15).

The classifier outputs a real score t = g(x) (logit of the positive class minus that of
the negative). With the sigmoid loss l(t, +1) = sigmoid(-t), l(t, -1) = sigmoid(t):

    uPU  (eq. 14):  pi R_P^+ + [R_U^- - pi R_P^-]
    nnPU (eq. 15):  pi R_P^+ + max(0, R_U^- - pi R_P^-)

nnPU is trained with Kiryo et al.'s step: when the negative risk R_U^- - pi R_P^- falls
below -beta, the step is taken on -gamma times it (pushing it back up) instead of on the
whole risk. The paper's settings are beta = 0, gamma = 1. The choice between the two
steps is made on the device (`torch.where`), so a training step never waits to read the
negative risk back.

`dist` is Dist-PU's label-distribution alignment (Zhao et al., CVPR 2022), with s =
sigmoid(t): the labelled positives' mean score should be 1 and U's mean score its prior,

    dist:  (1 - mean_P s) + |mean_U s - pi| / (2 pi) + entropy * H(s on U)

where H is the mean binary entropy, which pushes U's scores away from 0.5 (the authors
weigh it 0.002). This is their histogram loss with one bin and the polar proxies, in
closed form.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

PU_RISKS = ("nnpu", "upu", "dist")  # the risks `pu_risk` computes


def sigmoid_loss(t: torch.Tensor, sign: float) -> torch.Tensor:
    """l(t, y) = sigmoid(-y t) for y in {+1, -1}: bounded, symmetric, Kiryo's default."""
    return torch.sigmoid(-sign * t)


@dataclass(frozen=True)
class PURisk:
    objective: torch.Tensor  # what to differentiate for this step
    risk: torch.Tensor  # the estimator's value (eq. 14 or 15), for reporting
    negative_risk: torch.Tensor  # R_U^- - pi R_P^-
    corrected: torch.Tensor  # bool: nnPU's Kiryo step on the negative risk was taken


def label_distribution_risk(t_p: torch.Tensor, t_u: torch.Tensor, prior: float,
                            entropy: float = 0.0) -> PURisk:
    """Dist-PU's risk (the module's `dist`); `negative_risk` reports U's mean score
    minus the prior, the gap the alignment closes."""
    gap = torch.sigmoid(t_u).mean() - prior
    risk = (1.0 - torch.sigmoid(t_p).mean()) + gap.abs() / (2.0 * prior)
    # binary entropy from log-sigmoids: finite for any score
    log_s, log_not_s = F.logsigmoid(t_u), F.logsigmoid(-t_u)
    spread = -(log_s.exp() * log_s + log_not_s.exp() * log_not_s).mean()
    objective = risk + entropy * spread
    return PURisk(objective, objective.detach(), gap.detach(),
                  torch.zeros((), dtype=torch.bool, device=risk.device))


def pu_risk(t_p: torch.Tensor, t_u: torch.Tensor, prior: float, kind: str,
            beta: float = 0.0, gamma: float = 1.0, entropy: float = 0.0) -> PURisk:
    """t_p: scores of labelled positives; t_u: scores of unlabeled rows. `beta`, `gamma`:
    nnPU's step; `entropy`: dist's weight on U's entropy."""
    if kind not in PU_RISKS:
        raise ValueError(f"kind must be one of {PU_RISKS}, got {kind!r}")
    if not 0.0 < prior < 1.0:
        raise ValueError(f"prior must be in (0, 1), got {prior}")
    if kind == "dist":
        return label_distribution_risk(t_p, t_u, prior, entropy)
    positive_risk = prior * sigmoid_loss(t_p, +1.0).mean()
    negative_risk = sigmoid_loss(t_u, -1.0).mean() - prior * sigmoid_loss(t_p, -1.0).mean()
    if kind == "upu":
        risk = positive_risk + negative_risk
        return PURisk(risk, risk.detach(), negative_risk.detach(),
                      torch.zeros((), dtype=torch.bool, device=risk.device))
    risk = positive_risk + torch.clamp(negative_risk, min=0.0)
    corrected = negative_risk.detach() < -beta
    objective = torch.where(corrected, -gamma * negative_risk, positive_risk + negative_risk)
    return PURisk(objective, risk.detach(), negative_risk.detach(), corrected)
