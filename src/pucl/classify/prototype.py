"""A classifier made of class prototypes in the projection space (paper 003, eq. 6):
P(y | x) = softmax(<normalise(h(g(x))), normalise(mu_c)> / T'), with the trained
projector h and prototypes mu_c. It takes encoder features, like LinearHead, so that the
evaluate stage and the served model treat both alike. Logits are [negative, positive]."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from pucl.models.encoders import ProjectionHead


class PrototypeHead(nn.Module):
    def __init__(self, dim: int, proj_hidden: int, proj_dim: int, temperature: float):
        super().__init__()
        self.projector = ProjectionHead(dim, proj_hidden, proj_dim)
        self.prototypes = nn.Parameter(torch.zeros(2, proj_dim))  # rows: negative, positive
        self.temperature = temperature

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        z = F.normalize(self.projector(h), dim=1)
        return z @ F.normalize(self.prototypes, dim=1).T / self.temperature

    def score(self, h: torch.Tensor) -> torch.Tensor:
        logits = self(h)
        return logits[:, 1] - logits[:, 0]

    @torch.no_grad()
    def positive_score(self, features: np.ndarray) -> np.ndarray:
        self.eval()
        logits = self(torch.as_tensor(features, dtype=torch.float32))
        return torch.softmax(logits, dim=1)[:, 1].numpy()
