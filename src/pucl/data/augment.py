"""Label-preserving augmentations applied to whole batches of tensors.

One random affine map per image (rotation, translation, scale, and a horizontal mirror with
probability `hflip`: 0 for digits, whose meaning a mirror changes; 0.5 suits clothes and
natural images) via a single `affine_grid` + `grid_sample`, then per-image brightness and
contrast jitter. Working on batches keeps the CPU on learning rather than on per-sample
PIL calls; an explicit torch.Generator keeps it reproducible. Every draw is made on the
batch's device, with a generator on that device (pucl.runtime.device.seeded_generator): on a GPU
the augmentations never leave it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class AffineJitter:
    degrees: float = 10.0
    translate: float = 0.1
    scale_min: float = 0.9
    scale_max: float = 1.1
    brightness: float = 0.2
    contrast: float = 0.2
    hflip: float = 0.0

    def __post_init__(self) -> None:
        if not 0 < self.scale_min <= self.scale_max:
            raise ValueError(
                f"need 0 < scale_min <= scale_max, got {self.scale_min}, {self.scale_max}"
            )

    def draw(self, shape: torch.Size, generator: torch.Generator,
             dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, ...]:
        """The random numbers `apply` needs for a batch of `shape`, drawn on the
        generator's device: apart from the arithmetic, so that a CUDA graph can replay
        the arithmetic on fresh draws (pucl.runtime.step_graph)."""
        b, device = shape[0], generator.device

        def rand(kind: torch.dtype = dtype) -> torch.Tensor:
            return torch.rand(b, generator=generator, dtype=kind, device=device)

        angle, scale, tx, ty = rand(), rand(), rand(), rand()
        # A mirror is drawn only when enabled, so that hflip = 0 leaves the random stream
        # (and every earlier result) unchanged.
        mirror = (rand(torch.float32),) if self.hflip > 0 else ()
        return (angle, scale, tx, ty, *mirror, rand(), rand())

    def apply(self, x: torch.Tensor, draws: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """x: float [b, c, h, w] in [0, 1], with `draw`'s numbers -> augmented float
        [b, c, h, w] in [0, 1]."""
        b = x.shape[0]
        angle, scale, tx, ty, *rest = draws
        mirror_u, bright_u, contrast_u = rest if self.hflip > 0 else (None, *rest)

        def between(u: torch.Tensor, lo: float, hi: float) -> torch.Tensor:
            return lo + (hi - lo) * u

        angle = between(angle, -self.degrees, self.degrees) * (math.pi / 180.0)
        scale = between(scale, self.scale_min, self.scale_max)
        # affine_grid works in normalised coordinates [-1, 1]: a shift of t * width is 2t.
        tx = between(tx, -self.translate, self.translate) * 2.0
        ty = between(ty, -self.translate, self.translate) * 2.0
        cos, sin = torch.cos(angle) / scale, torch.sin(angle) / scale
        # A mirror negates the input x coordinate.
        mirror = (torch.where(mirror_u < self.hflip, -1.0, 1.0).to(x.dtype)
                  if mirror_u is not None else torch.ones(b, dtype=x.dtype, device=x.device))
        theta = torch.stack(
            [torch.stack([cos * mirror, -sin, tx], 1), torch.stack([sin * mirror, cos, ty], 1)],
            1)
        grid = F.affine_grid(theta, list(x.shape), align_corners=False)
        out = F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)

        bright = between(bright_u, 1 - self.brightness, 1 + self.brightness).view(b, 1, 1, 1)
        contrast = between(contrast_u, 1 - self.contrast, 1 + self.contrast).view(b, 1, 1, 1)
        mean = out.mean(dim=(1, 2, 3), keepdim=True)
        out = (out - mean) * contrast + mean
        return (out * bright).clamp_(0.0, 1.0)

    def __call__(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """x: float [b, c, h, w] in [0, 1] -> augmented float [b, c, h, w] in [0, 1]."""
        return self.apply(x, self.draw(x.shape, generator, x.dtype))


@dataclass(frozen=True)
class FeatureNoise:
    """Augmentation of tabular rows [b, d]: Gaussian noise scaled by each feature's spread
    in the batch, and features masked to their batch mean with probability `drop`."""

    noise: float = 0.1
    drop: float = 0.1

    def draw(self, shape: torch.Size, generator: torch.Generator,
             dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, ...]:
        """The noise and the drop mask's uniforms for a batch of `shape`."""
        noise = torch.randn(shape, generator=generator, dtype=dtype, device=generator.device)
        if self.drop <= 0:
            return (noise,)
        return noise, torch.rand(shape, generator=generator, device=generator.device)

    def apply(self, x: torch.Tensor, draws: tuple[torch.Tensor, ...]) -> torch.Tensor:
        std = x.std(dim=0, keepdim=True) if len(x) > 1 else torch.zeros_like(x[:1])
        out = x + self.noise * std * draws[0]
        if self.drop > 0:
            out = torch.where(draws[1] < self.drop, x.mean(dim=0, keepdim=True).expand_as(x),
                              out)
        return out

    def __call__(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        return self.apply(x, self.draw(x.shape, generator, x.dtype))


def make_augment(params, tabular: bool) -> AffineJitter | FeatureNoise:
    """The augmentation for this kind of input from `pretrain.augment` params."""
    if tabular:
        return FeatureNoise(params.feature_noise, params.feature_drop)
    fields = ("degrees", "translate", "scale_min", "scale_max", "brightness", "contrast",
              "hflip")
    return AffineJitter(**{f: getattr(params, f) for f in fields})


def to_unit_float(x: torch.Tensor) -> torch.Tensor:
    """uint8 pixels -> floats in [0, 1]; real-valued features pass through as float32."""
    if x.dtype == torch.uint8:
        return x.to(torch.float32).div_(255.0)
    return x.to(torch.float32)


def unit_scale(x: np.ndarray) -> np.ndarray:
    """uint8 pixels -> float64 in [0, 1]; real-valued features as float64 (the numpy
    counterpart of to_unit_float, for the prior estimators and model examples)."""
    return x / 255.0 if x.dtype == np.uint8 else x.astype(np.float64)


def normalize(x: torch.Tensor) -> torch.Tensor:
    """Centre pixel values for the encoder ([0, 1] -> [-1, 1]). Tabular rows [n, d] pass
    unchanged: the MLP encoder standardises them with its input BatchNorm."""
    return x * 2.0 - 1.0 if x.dim() == 4 else x


def view_draws(augment, images: torch.Tensor, rows: int, generator: torch.Generator,
               views: int = 1) -> list[tuple[torch.Tensor, ...]]:
    """The random numbers of `views` augmented views of `rows` images shaped like those of
    `images`, one view after the other, on the generator's device: drawn outside a step
    that is replayed as a CUDA graph (pucl.runtime.step_graph)."""
    shape = (rows, *images.shape[1:])
    return [augment.draw(shape, generator) for _ in range(views)]


def augmented_views(images: torch.Tensor, idx: torch.Tensor, augment,
                    draws: list[tuple[torch.Tensor, ...]]) -> list[torch.Tensor]:
    """images[idx] augmented with each view's draws and normalised, on the images' device."""
    x = to_unit_float(images[idx])
    return [normalize(augment.apply(x, d)) for d in draws]
