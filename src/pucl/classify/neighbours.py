"""Neighbour smoothing of a trained head's scores (`classifier.neighbours`).

A row's score becomes the mean of its own score and the scores of its k nearest training
rows, by cosine similarity of the features the head reads. The bank of training features
and their scores travels with the head, so the smoothed classifier stays inductive: a
new row needs only the bank, never the other rows it is scored with. Rows of one class
sit together in the fine-tuned feature space more reliably than a linear boundary
separates them, so averaging over a neighbourhood corrects isolated mistakes of the
head (docs/classifiers.md has the measurements).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from pucl.classify.base import TwoClassHead
from pucl.runtime import work

# Rows compared with the whole bank at once: bounds the similarity matrix to
# CHUNK_ROWS x bank rows floats (1024 x 60,000 = 245 MB for Fashion-MNIST).
CHUNK_ROWS = 1024
# Scores are kept away from 0 and 1 so the logits stay finite.
EPSILON = 1e-6


def nearest_rows(queries: torch.Tensor, bank: torch.Tensor, k: int) -> torch.Tensor:
    """Indices [n, k] of each query's k most similar rows of `bank` by inner product
    (cosine when both are unit rows), on the tensors' device, CHUNK_ROWS queries at a time
    so the similarity matrix never holds every query at once. An all-zero row is equally
    similar (0) to every row: its neighbours are whichever ties topk keeps."""
    if not len(queries):
        return torch.empty((0, k), dtype=torch.long, device=queries.device)
    work.add(float(len(queries)) * len(bank) * bank.shape[1])
    return torch.cat([(queries[start:start + CHUNK_ROWS] @ bank.T).topk(k, dim=1).indices
                      for start in range(0, len(queries), CHUNK_ROWS)])


class NeighbourHead(TwoClassHead):
    """`base` with its positive score averaged over each row and its `k` nearest rows of
    `bank` (training features, float32 [n, d]), whose scores by `base` are kept."""

    def __init__(self, base: TwoClassHead, bank: torch.Tensor, k: int,
                 bank_scores: torch.Tensor | None = None):
        super().__init__()
        if not 1 <= k <= len(bank):
            raise ValueError(f"k must be in [1, {len(bank)}] (the bank's rows), got {k}")
        self.base = base.eval()
        self.k = k
        bank = bank.detach().float()
        self.register_buffer("bank", F.normalize(bank, dim=1))
        if bank_scores is None:
            with torch.no_grad():
                bank_scores = torch.cat([self._base_score(bank[s:s + CHUNK_ROWS])
                                         for s in range(0, len(bank), CHUNK_ROWS)])
        self.register_buffer("bank_scores", bank_scores.detach().float())

    def _base_score(self, h: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.base(h), dim=1)[:, 1]

    def smoothed_score(self, h: torch.Tensor) -> torch.Tensor:
        """P(y = 1 | x) per row of features h [n, d]: (own score + the k neighbours'
        scores) / (k + 1)."""
        own = self._base_score(h)
        nearest = nearest_rows(F.normalize(h.float(), dim=1), self.bank, self.k)
        return (own + self.bank_scores[nearest].sum(dim=1)) / (self.k + 1)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """Two logits whose softmax is the smoothed score: [log(1 - p), log(p)]."""
        p = self.smoothed_score(h).clamp(EPSILON, 1.0 - EPSILON)
        return torch.stack([torch.log1p(-p), torch.log(p)], dim=1)
