"""The classifier as one module for serving (`ServedClassifier`, the model evaluate logs
to MLflow; `pucl.PUClassifier` is the scikit-learn estimator): frozen encoder, then head,
optionally averaged over test-time views (`evaluate.tta`) and over several encoders'
classifiers (`pretrain.members`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch
from torch import nn

from pucl.data.augment import normalize
from pucl.data.views import tta_views


class ServedClassifier(nn.Module):
    """float32 pixels in [0, 1], shape [n, c, h, w] (or raw features [n, d] for tabular
    data) -> P(y = 1 | x), shape [n]. With `mirror`, the mean of the scores of each
    image and of its horizontal mirror image (for classes a mirror does not change); with
    `shift` > 0, also over its translations by that many pixels (tta_views).
    With `others`, (encoder, head) pairs whose scores are averaged with this one's."""

    def __init__(self, encoder: nn.Module, head: nn.Module, mirror: bool = False,
                 others: Sequence[tuple[nn.Module, nn.Module]] = (), shift: int = 0):
        super().__init__()
        self.encoder = encoder
        self.head = head  # LinearHead, PrototypeHead or a NeighbourHead around either
        self.mirror = mirror
        self.shift = shift
        self.other_encoders = nn.ModuleList([encoder for encoder, _ in others])
        self.other_heads = nn.ModuleList([head for _, head in others])

    def members(self) -> Iterator[tuple[nn.Module, nn.Module]]:
        yield self.encoder, self.head
        yield from zip(self.other_encoders, self.other_heads, strict=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        views = [normalize(v) for v in tta_views(x, self.mirror, self.shift)]
        scores = [torch.softmax(head(encoder(view)), dim=1)[:, 1]
                  for encoder, head in self.members() for view in views]
        return torch.stack(scores).mean(dim=0)
