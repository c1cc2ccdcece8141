"""Downstream classifier: a linear head on frozen features, cross-entropy on pseudo-labels
(paper 000 section 7.1, "CE over PUPL")."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm


@dataclass(frozen=True)
class LinearSettings:
    epochs: int
    lr: float
    weight_decay: float
    batch_size: int


class LinearHead(nn.Module):
    """Standardise features with statistics of the training rows, then one linear layer
    producing two logits."""

    def __init__(self, dim: int):
        super().__init__()
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("scale", torch.ones(dim))
        self.linear = nn.Linear(dim, 2)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.linear((h - self.mean) / self.scale)

    @torch.no_grad()
    def positive_score(self, features: np.ndarray) -> np.ndarray:
        """P(y = 1 | x) per row."""
        self.eval()
        logits = self(torch.as_tensor(features, dtype=torch.float32))
        return torch.softmax(logits, dim=1)[:, 1].numpy()


def train_linear_head(
    features: np.ndarray,
    labels: np.ndarray,
    settings: LinearSettings,
    generator: torch.Generator,
    progress: bool = True,
) -> tuple[LinearHead, list[float]]:
    """Train on (features [n, d], labels {0,1} [n]); returns the head and per-epoch loss."""
    x = torch.as_tensor(features, dtype=torch.float32)
    y = torch.as_tensor(np.array(labels, dtype=np.int64))
    head = LinearHead(x.shape[1])
    head.mean.copy_(x.mean(0))
    head.scale.copy_(x.std(0).clamp_min(1e-6))
    optimizer = torch.optim.Adam(head.parameters(), lr=settings.lr,
                                 weight_decay=settings.weight_decay)
    loss_fn = nn.CrossEntropyLoss()
    losses = []
    batch = min(settings.batch_size, len(x))
    for _ in tqdm(range(settings.epochs), desc="classifier", unit="epoch", disable=not progress):
        head.train()
        order = torch.randperm(len(x), generator=generator)
        total = 0.0
        for start in range(0, len(x), batch):
            idx = order[start:start + batch]
            loss = loss_fn(head(x[idx]), y[idx])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            total += float(loss.detach()) * len(idx)
        losses.append(total / len(x))
    return head.eval(), losses
