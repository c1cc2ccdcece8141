"""Phantom label disambiguation of NcPU (paper 001, section 3.2; Algorithm 1).

Pure state updates, one mini-batch at a time, with the paper's names:
- class-conditional prototypes mu_c: a normalised moving average of the online
  embeddings of the samples the classifier assigns to class c (eq. 9), one sample after
  the other as in Algorithm 1 (lines 6-8);
- phantom pseudo targets: s' moves towards the one-hot nearest prototype (eq. 10); an
  unlabeled sample's target s is the negative one-hot while the classifier's negative
  probability f_1(x) reaches the threshold tau, and s' otherwise (eq. 11). Labelled
  positives keep [1, 0];
- the self-adaptive threshold tau (eq. 12-13): EMAs of the batch's mean max-probability
  and of each class's mean probability, both starting at 0.5.

Class index 0 is positive and 1 negative, as in the paper's targets [1, 0] / [0, 1].
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

POSITIVE, NEGATIVE = 0, 1


def update_prototypes(prototypes: torch.Tensor, q: torch.Tensor, assigned: torch.Tensor,
                      alpha: float) -> torch.Tensor:
    """Eq. 9 applied sample by sample: prototypes [2, d] (unit rows), q [b, d] online
    embeddings, assigned [b] classifier classes. Returns the new prototypes."""
    mu = prototypes.detach().clone()
    q_unit = F.normalize(q.detach(), dim=1)
    for z, c in zip(q_unit, assigned.tolist(), strict=True):
        mu[c] = F.normalize(alpha * mu[c] + (1.0 - alpha) * z, dim=0)
    return mu


def phantom_targets(s_prime: torch.Tensor, q: torch.Tensor, prototypes: torch.Tensor,
                    negative_prob: torch.Tensor, tau: float, beta: float,
                    labeled: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eq. 10-11 for one batch. s_prime [b, 2] the samples' running targets; q [b, d];
    negative_prob [b] = f_1(x); labeled [b] bool. Returns (s, new s_prime)."""
    nearest = (F.normalize(q.detach(), dim=1) @ prototypes.T).argmax(dim=1)
    r = F.one_hot(nearest, 2).to(s_prime.dtype)
    new_prime = beta * s_prime + (1.0 - beta) * r
    negative = torch.tensor([0.0, 1.0], dtype=s_prime.dtype).expand_as(new_prime)
    s = torch.where((negative_prob >= tau).view(-1, 1), negative, new_prime)
    positive = torch.tensor([1.0, 0.0], dtype=s_prime.dtype).expand_as(new_prime)
    s = torch.where(labeled.view(-1, 1), positive, s)
    new_prime = torch.where(labeled.view(-1, 1), positive, new_prime)
    return s, new_prime


@dataclass
class SelfAdaptiveThreshold:
    """tau~ and rho~ of eq. 12, both initialised to 0.5; `tau` is eq. 13."""

    gamma: float
    global_level: float = 0.5
    class_level: list[float] = field(default_factory=lambda: [0.5, 0.5])

    def update(self, probs: torch.Tensor) -> float:
        """probs: [b, 2] softmax outputs of one batch. Returns the new tau."""
        p = probs.detach().to(torch.float64)
        g = self.gamma
        self.global_level = g * self.global_level + (1 - g) * float(p.max(dim=1).values.mean())
        means = p.mean(dim=0).tolist()
        self.class_level = [g * old + (1 - g) * m for old, m in
                            zip(self.class_level, means, strict=True)]
        return self.tau

    @property
    def tau(self) -> float:
        rho = self.class_level
        return rho[NEGATIVE] / max(rho) * self.global_level
