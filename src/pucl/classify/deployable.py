"""The classifier as one module for serving: frozen encoder followed by the linear head."""

from __future__ import annotations

import torch
from torch import nn

from pucl.data.augment import normalize


class PUClassifier(nn.Module):
    """float32 pixels in [0, 1], shape [n, c, h, w] (or raw features [n, d] for tabular
    data) -> P(y = 1 | x), shape [n]."""

    def __init__(self, encoder: nn.Module, head: nn.Module):  # LinearHead or PrototypeHead
        super().__init__()
        self.encoder = encoder
        self.head = head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.head(self.encoder(normalize(x)))
        return torch.softmax(logits, dim=1)[:, 1]
