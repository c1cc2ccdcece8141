"""What every classifier head shares: it maps encoder features to two logits
[negative, positive], and scores follow from those. LinearHead lives here, apart from its
training code, so that loading a head never imports the PU risks."""

from __future__ import annotations

import copy

import numpy as np
import torch
from torch import nn


class TwoClassHead(nn.Module):
    def score(self, h: torch.Tensor) -> torch.Tensor:
        """The real-valued decision g(x) = logit(positive) - logit(negative)."""
        logits = self(h)
        return logits[:, 1] - logits[:, 0]

    @torch.no_grad()
    def positive_score(self, features: np.ndarray,
                       device: torch.device | str | None = None) -> np.ndarray:
        """P(y = 1 | x) per row, computed on `device` (the CPU by default) by a copy of the
        head there: neighbour smoothing compares every row with its whole bank, work for
        a GPU, while the head itself stays where it was loaded (and is saved from)."""
        self.eval()
        device = torch.device(device or "cpu")
        head = self if device.type == "cpu" else copy.deepcopy(self).to(device)
        logits = head(torch.as_tensor(features, dtype=torch.float32, device=device))
        return torch.softmax(logits, dim=1)[:, 1].cpu().numpy()


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
