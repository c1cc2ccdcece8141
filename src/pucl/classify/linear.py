"""Downstream classifier: a linear head on frozen features, trained with cross-entropy on
pseudo-labels (paper 000 section 7.1, "CE over PUPL"; also naive CE with U as negative)
or with a cost-sensitive PU risk (uPU / nnPU, eq. 14-15)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from pucl.classify.base import LinearHead
from pucl.classify.pu_risk import pu_risk


@dataclass(frozen=True)
class LinearSettings:
    epochs: int
    lr: float
    weight_decay: float
    batch_size: int


def _standardised_head(x: torch.Tensor, settings: LinearSettings
                       ) -> tuple[LinearHead, torch.optim.Optimizer]:
    head = LinearHead(x.shape[1])
    head.mean.copy_(x.mean(0))
    head.scale.copy_(x.std(0).clamp_min(1e-6))
    optimizer = torch.optim.Adam(head.parameters(), lr=settings.lr,
                                 weight_decay=settings.weight_decay)
    return head, optimizer


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
    head, optimizer = _standardised_head(x, settings)
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


class PUBatches:
    """Index batches for a PU risk: an epoch is one shuffled pass over U, and each batch
    of U is paired with an equally large batch of P, drawn without replacement and
    reshuffled whenever P runs out (P is usually much smaller than U, and a batch without
    positives has no positive risk)."""

    def __init__(self, n_p: int, n_u: int, batch_size: int, generator: torch.Generator):
        self.n_p, self.n_u = n_p, n_u
        self.batch = min(batch_size, n_u)
        self.generator = generator
        self._p_order, self._p_next = torch.randperm(n_p, generator=generator), 0

    def epoch(self):
        order = torch.randperm(self.n_u, generator=self.generator)
        for start in range(0, self.n_u, self.batch):
            idx_u = order[start:start + self.batch]
            take = min(len(idx_u), self.n_p)
            if self._p_next + take > self.n_p:
                self._p_order = torch.randperm(self.n_p, generator=self.generator)
                self._p_next = 0
            idx_p = self._p_order[self._p_next:self._p_next + take]
            self._p_next += take
            yield idx_p, idx_u


def train_pu_head(
    positive: np.ndarray,
    unlabeled: np.ndarray,
    prior: float,
    kind: str,
    settings: LinearSettings,
    generator: torch.Generator,
    progress: bool = True,
    beta: float = 0.0,
    gamma: float = 1.0,
) -> tuple[LinearHead, list[float]]:
    """uPU / nnPU on (labelled positives [n_p, d], unlabeled [n_u, d]), batched by
    `PUBatches`."""
    x_p = torch.as_tensor(positive, dtype=torch.float32)
    x_u = torch.as_tensor(unlabeled, dtype=torch.float32)
    head, optimizer = _standardised_head(torch.cat([x_p, x_u]), settings)
    batches = PUBatches(len(x_p), len(x_u), settings.batch_size, generator)
    losses = []
    for _ in tqdm(range(settings.epochs), desc=f"classifier ({kind})", unit="epoch",
                  disable=not progress):
        head.train()
        total, steps = 0.0, 0
        for idx_p, idx_u in batches.epoch():
            result = pu_risk(head.score(x_p[idx_p]), head.score(x_u[idx_u]), prior, kind,
                             beta, gamma)
            optimizer.zero_grad(set_to_none=True)
            result.objective.backward()
            optimizer.step()
            total += float(result.risk)
            steps += 1
        losses.append(total / steps)
    return head.eval(), losses
