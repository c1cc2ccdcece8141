"""Downstream classifier: a linear head on frozen features, trained with cross-entropy on
pseudo-labels (paper 000 section 7.1, "CE over PUPL"; also naive CE with U as negative)
or with a cost-sensitive PU risk (uPU / nnPU, eq. 14-15).

A head trains where its generator lives (pucl.runtime.device.seeded_generator(seed, device)):
features, batch indices and steps stay there (each step one CUDA graph on a GPU:
pucl.runtime.step_graph), losses are read back once per epoch, and the trained head is returned
on the CPU, where it scores feature arrays."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from pucl.classify.base import LinearHead
from pucl.classify.pu_risk import pu_risk
from pucl.runtime.device import LossSum, adam, descend, epoch_order
from pucl.runtime.progress import EpochBar
from pucl.runtime.step_graph import GraphedStep


@dataclass(frozen=True)
class LinearSettings:
    epochs: int
    lr: float
    weight_decay: float
    batch_size: int


def _standardised_head(x: torch.Tensor, settings: LinearSettings
                       ) -> tuple[LinearHead, torch.optim.Optimizer]:
    head = LinearHead(x.shape[1])  # initialised from torch's global (CPU) state
    head.mean.copy_(x.mean(0))
    head.scale.copy_(x.std(0).clamp_min(1e-6))
    head.to(x.device)
    optimizer = adam(head.parameters(), settings.lr, settings.weight_decay)
    return head, optimizer


def train_linear_head(
    features: np.ndarray,
    labels: np.ndarray,
    settings: LinearSettings,
    generator: torch.Generator,
    progress: bool = True,
) -> tuple[LinearHead, list[float]]:
    """Train on (features [n, d], labels {0,1} [n]); returns the head and per-epoch loss."""
    device = generator.device
    x = torch.as_tensor(features, dtype=torch.float32).to(device)
    y = torch.as_tensor(np.array(labels, dtype=np.int64)).to(device)
    head, optimizer = _standardised_head(x, settings)
    loss_fn = nn.CrossEntropyLoss()

    @GraphedStep  # one CUDA graph per batch size on a GPU; a plain call elsewhere
    def learn(idx: torch.Tensor) -> torch.Tensor:
        loss = loss_fn(head(x[idx]).float(), y[idx])
        descend(optimizer, loss)
        return loss.detach().double() * len(idx)  # summed over rows, as the host did

    losses = []
    batch = min(settings.batch_size, len(x))
    for _ in EpochBar(settings.epochs, "classifier", disable=not progress):
        head.train()
        order = epoch_order(len(x), generator)
        epoch = LossSum()
        for start in range(0, len(x), batch):
            epoch.add(learn(order[start:start + batch]), count=False)
        losses.append(float(epoch.total) / len(x))
    return head.eval().cpu(), losses


class PUBatches:
    """Index batches for a PU risk: an epoch is one shuffled pass over U, and each batch
    of U is paired with an equally large batch of P, drawn without replacement and
    reshuffled whenever P runs out (P is usually much smaller than U, and a batch without
    positives has no positive risk)."""

    def __init__(self, n_p: int, n_u: int, batch_size: int, generator: torch.Generator):
        self.n_p, self.n_u = n_p, n_u
        self.batch = min(batch_size, n_u)
        self.generator = generator
        self._p_order, self._p_next = epoch_order(n_p, generator), 0

    def epoch(self):
        order = epoch_order(self.n_u, self.generator)
        for start in range(0, self.n_u, self.batch):
            idx_u = order[start:start + self.batch]
            take = min(len(idx_u), self.n_p)
            if self._p_next + take > self.n_p:
                self._p_order = epoch_order(self.n_p, self.generator)
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
    entropy: float = 0.0,
) -> tuple[LinearHead, list[float]]:
    """A PU risk (pucl.classify.pu_risk: uPU, nnPU, dist) on (labelled positives [n_p, d],
    unlabeled [n_u, d]), batched by `PUBatches`."""
    x_p = torch.as_tensor(positive, dtype=torch.float32).to(generator.device)
    x_u = torch.as_tensor(unlabeled, dtype=torch.float32).to(generator.device)
    head, optimizer = _standardised_head(torch.cat([x_p, x_u]), settings)
    batches = PUBatches(len(x_p), len(x_u), settings.batch_size, generator)

    @GraphedStep  # one CUDA graph per batch size on a GPU; a plain call elsewhere
    def learn(idx_p: torch.Tensor, idx_u: torch.Tensor) -> torch.Tensor:
        result = pu_risk(head.score(x_p[idx_p]).float(), head.score(x_u[idx_u]).float(),
                         prior, kind, beta, gamma, entropy)
        descend(optimizer, result.objective)
        return result.risk.detach()

    losses = []
    for _ in EpochBar(settings.epochs, f"classifier ({kind})", disable=not progress):
        head.train()
        epoch = LossSum()
        for idx_p, idx_u in batches.epoch():
            epoch.add(learn(idx_p, idx_u))
        losses.append(epoch.mean())
    return head.eval().cpu(), losses
