"""What every classifier head shares: it maps encoder features to two logits
[negative, positive], and scores follow from those."""

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
