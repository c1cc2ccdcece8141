"""The views a test image is scored on (evaluate.tta, evaluate.tta_shift): the image, its
translations and its mirror image, whose scores the classifier averages.

Kept apart from the training augmentations (pucl.data.augment), whose code is part of a
cached encoder's fingerprint: changing how tests are scored must not retrain encoders.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch


def translate(x: torch.Tensor, dx: int, dy: int) -> torch.Tensor:
    """Images [..., h, w] moved dx pixels right and dy down; what leaves the frame is
    dropped and what enters is 0 (black), as in affine_grid's zero padding."""
    if dx == 0 and dy == 0:
        return x
    out = torch.zeros_like(x)
    h, w = x.shape[-2:]
    out[..., max(dy, 0):h + min(dy, 0), max(dx, 0):w + min(dx, 0)] = \
        x[..., max(-dy, 0):h + min(-dy, 0), max(-dx, 0):w + min(-dx, 0)]
    return out


def iter_tta_views(x: torch.Tensor, mirror: bool, shift: int) -> Iterator[torch.Tensor]:
    """The views a test image is scored on (evaluate.tta, evaluate.tta_shift): the image
    itself first; with `shift` > 0 also its 8 translations by `shift` pixels (a 3 x 3
    grid); with `mirror` the same again for its left-right mirror image. One at a time,
    so that scoring a large test set never holds all 18 copies of it."""
    steps = (0, -shift, shift) if shift else (0,)
    for mirrored in ((False, True) if mirror else (False,)):
        base = torch.flip(x, dims=[-1]) if mirrored else x
        for dy in steps:
            for dx in steps:
                yield translate(base, dx, dy)


def tta_views(x: torch.Tensor, mirror: bool, shift: int) -> list[torch.Tensor]:
    """iter_tta_views as a list (the served model's forward pass, exported whole)."""
    return list(iter_tta_views(x, mirror, shift))
