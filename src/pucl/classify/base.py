"""What every classifier head shares: it maps encoder features to two logits
[negative, positive], and scores follow from those. LinearHead lives here, apart from its
training code, so that loading a head never imports the PU risks."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn


class TwoClassHead(nn.Module):
    def score(self, h: torch.Tensor) -> torch.Tensor:
        """The real-valued decision g(x) = logit(positive) - logit(negative)."""
        logits = self(h)
        return logits[:, 1] - logits[:, 0]

    @torch.no_grad()
    def positive_score(self, features: np.ndarray) -> np.ndarray:
        """P(y = 1 | x) per row."""
        self.eval()
        logits = self(torch.as_tensor(features, dtype=torch.float32))
        return torch.softmax(logits, dim=1)[:, 1].numpy()


class LinearHead(TwoClassHead):
    """Standardise features with statistics of the training rows, then one linear layer
    producing two logits."""

    def __init__(self, dim: int):
        super().__init__()
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("scale", torch.ones(dim))
        self.linear = nn.Linear(dim, 2)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.linear((h - self.mean) / self.scale)
