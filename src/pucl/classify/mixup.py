"""Dist-PU's mixup term for fine-tuning (Zhao et al. 2022, the phase after their warm-up):
it softens the head's decisions between rows, against the confirmation bias of learning
from its own calls.

Every training row keeps a soft label: the head's probability when fine-tuning starts,
then its clean view's probability each time a batch holds it (labelled positives stay 1).
A step also mixes its augmented views with a shuffled copy of themselves,
lam x + (1 - lam) x[perm] with lam ~ Beta(alpha, alpha), and asks the mixed rows'
probabilities s to match the same mix of the soft labels,

    weight * [lam BCE(s, y) + (1 - lam) BCE(s, y[perm])] + entropy * H(s)

(BCE is affine in its target, so this is one BCE against lam y + (1 - lam) y[perm]).
The authors weigh it 5.0, with alpha 6.0 and the mixed rows' entropy 0.04.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from pucl.classify.pu_risk import binary_entropy
from pucl.data.augment import normalize, to_unit_float


@dataclass(frozen=True)
class MixupSettings:
    weight: float  # 0: no mixup term
    alpha: float = 6.0
    entropy: float = 0.04


class SoftLabels:
    """Each row's soft label (a probability), on the images' device; labelled rows are 1."""

    def __init__(self, probabilities: torch.Tensor, labelled: torch.Tensor):
        self.labelled = torch.zeros(len(probabilities), dtype=torch.bool,
                                    device=probabilities.device)
        self.labelled[labelled] = True
        self.values = torch.where(self.labelled, 1.0, probabilities.float())

    @classmethod
    @torch.no_grad()
    def of_head(cls, encoder: nn.Module, head: nn.Module, images: torch.Tensor,
                labelled: torch.Tensor, batch_size: int = 1024) -> SoftLabels:
        """The head's probabilities of the clean images, in eval mode (the start)."""
        encoder.eval()
        head.eval()
        scores = [head.score(encoder(normalize(to_unit_float(images[i:i + batch_size]))))
                  for i in range(0, len(images), batch_size)]
        return cls(torch.sigmoid(torch.cat(scores).float()), labelled)

    def update(self, rows: torch.Tensor, scores: torch.Tensor) -> None:
        """Rows' soft labels from their clean views' scores (labelled rows stay 1)."""
        self.values[rows] = torch.where(self.labelled[rows], 1.0,
                                        torch.sigmoid(scores.detach().float()))


def mixup_draws(n: int, settings: MixupSettings, generator: torch.Generator,
                rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """lam ~ Beta(alpha, alpha) and a permutation of the batch's n rows, on the generator's
    device: drawn outside a step that is replayed as a CUDA graph."""
    lam = torch.tensor(rng.beta(settings.alpha, settings.alpha), dtype=torch.float32,
                       device=generator.device)
    return lam, torch.randperm(n, generator=generator, device=generator.device)


def mixup_loss(encoder: nn.Module, head: nn.Module, views: torch.Tensor,
               targets: torch.Tensor, lam: torch.Tensor, perm: torch.Tensor,
               settings: MixupSettings) -> torch.Tensor:
    """The mixup term of one batch: `views` as the step's encoder saw them, `targets` their
    soft labels."""
    mixed = lam * views + (1 - lam) * views[perm]
    t = head.score(encoder(mixed)).float()
    mixed_targets = lam * targets + (1 - lam) * targets[perm]
    return (settings.weight * F.binary_cross_entropy_with_logits(t, mixed_targets)
            + settings.entropy * binary_entropy(t))
