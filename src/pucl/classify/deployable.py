"""The classifier as one module for serving: frozen encoder followed by the linear head,
optionally averaged over test-time views (`evaluate.tta`)."""

from __future__ import annotations

import torch
from torch import nn

from pucl.data.augment import normalize


class PUClassifier(nn.Module):
    """float32 pixels in [0, 1], shape [n, c, h, w] (or raw features [n, d] for tabular
    data) -> P(y = 1 | x), shape [n]. With `mirror`, the mean of the scores of each
    image and of its horizontal mirror image (for classes a mirror does not change)."""

    def __init__(self, encoder: nn.Module, head: nn.Module, mirror: bool = False):
        super().__init__()
        self.encoder = encoder
        self.head = head  # LinearHead, PrototypeHead or a NeighbourHead around either
        self.mirror = mirror

    def _score(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.head(self.encoder(normalize(x)))
        return torch.softmax(logits, dim=1)[:, 1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.mirror:
            return (self._score(x) + self._score(torch.flip(x, dims=[-1]))) / 2
        return self._score(x)
