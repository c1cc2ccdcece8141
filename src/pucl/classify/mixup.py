"""Dist-PU's mixup term for fine-tuning (Zhao et al., CVPR 2022, their second phase).

Each batch of P and U is mixed with a shuffled copy of itself, x~ = lam x + (1 - lam)
x[perm] with lam ~ Beta(alpha, alpha), and the network's score of x~ is pulled, by binary
cross-entropy, towards the same mixture of the rows' soft pseudo-labels: 1 for a
labelled positive, the network's own current sigmoid score (detached) for a row of U.
A small entropy term on the mixed scores keeps them away from 0.5. The authors weigh the
two 5.0 and 0.04 with alpha 6.0 (lam near 0.5), and add them to the label-distribution
risk; here they are added to it while fine-tuning, after the head has been fit.

lam is drawn on the CPU by the inverse Beta CDF of a uniform from the training
generator: one draw per batch, all of an epoch's at once (one read back from a GPU an
epoch), so the recorded step itself draws nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from scipy.special import betaincinv

from pucl.classify.pu_risk import binary_entropy


@dataclass(frozen=True)
class Mixup:
    weight: float = 5.0  # of the cross-entropy to the mixed pseudo-labels
    alpha: float = 6.0  # Beta(alpha, alpha) of the mixing weight
    entropy: float = 0.04  # of the mixed scores' mean binary entropy


def beta_draws(alpha: float, n: int, generator: torch.Generator) -> torch.Tensor:
    """n draws of Beta(alpha, alpha) (CPU float32), from `generator`'s uniforms."""
    uniform = torch.rand(n, generator=generator, device=generator.device,
                         dtype=torch.float64).cpu().numpy()
    return torch.from_numpy(betaincinv(alpha, alpha, uniform)).float()


def mixup_term(score: Callable[[torch.Tensor], torch.Tensor], views: torch.Tensor,
               scores: torch.Tensor, n_p: int, perm: torch.Tensor, lam: torch.Tensor,
               mixup: Mixup) -> torch.Tensor:
    """The weighted mixup loss of one batch: `views` are its inputs (the first n_p rows
    labelled positives, the rest U), `scores` the network's scores of them, `score` the
    network; `perm` pairs each row with another, `lam` (0-dim) mixes them."""
    pseudo = torch.cat([torch.ones(n_p, device=scores.device, dtype=scores.dtype),
                        torch.sigmoid(scores[n_p:]).detach()])
    mixed = score(lam * views + (1.0 - lam) * views[perm]).float()
    # cross-entropy is linear in its target, so one term against the mixed target is
    # lam times the loss to the first row's label plus (1 - lam) times the second's
    target = lam * pseudo + (1.0 - lam) * pseudo[perm]
    loss = F.binary_cross_entropy_with_logits(mixed, target)
    return mixup.weight * loss + mixup.entropy * binary_entropy(mixed)
