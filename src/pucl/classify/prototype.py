"""A classifier made of class prototypes in the projection space (paper 003, eq. 6):
P(y | x) = softmax(<normalise(h(g(x))), normalise(mu_c)> / T'), with the trained
projector h and prototypes mu_c. It takes encoder features, like LinearHead, so that the
evaluate stage and the served model treat both alike. Logits are [negative, positive]."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from pucl.classify.base import TwoClassHead
from pucl.models.encoders import ProjectionHead


class PrototypeHead(TwoClassHead):
    def __init__(self, dim: int, proj_hidden: int, proj_dim: int, temperature: float):
        super().__init__()
        self.projector = ProjectionHead(dim, proj_hidden, proj_dim)
        self.prototypes = nn.Parameter(torch.zeros(2, proj_dim))  # rows: negative, positive
        self.temperature = temperature

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        z = F.normalize(self.projector(h), dim=1)
        return z @ F.normalize(self.prototypes, dim=1).T / self.temperature
