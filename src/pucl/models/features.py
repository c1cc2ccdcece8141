"""Frozen features of a trained model: encoder outputs g(x) or projections h(g(x))."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch
import torch.nn.functional as F

from pucl.data.augment import normalize, to_unit_float
from pucl.data.views import iter_tta_views
from pucl.models import ContrastiveModel


def encoder_part(encoder: torch.nn.Module, which: str) -> torch.nn.Module:
    """The part of the encoder whose output a classifier reads. "encoder": all of it.
    "trunk": its convolutional trunk when fully connected layers follow it (LeNet-5's
    256-d convolution features, before the 120- and 84-unit layers that pretraining
    shapes for the contrastive loss); the whole encoder when it has no such layers.
    The part shares the encoder's parameters, so training it trains the encoder."""
    if which not in ("encoder", "trunk"):
        raise ValueError(f"which must be 'encoder' or 'trunk', got {which!r}")
    if which == "trunk" and hasattr(encoder, "features") and hasattr(encoder, "fc"):
        return encoder.features
    return encoder


def scoring_views(images: np.ndarray, mirror: bool, shift: int = 0) -> Iterator[np.ndarray]:
    """The views a test image is scored on, as arrays of its dtype, one at a time: itself
    first, then its translations by `shift` pixels and its mirror image (iter_tta_views;
    the same views as PUClassifier(mirror=..., shift=...)). Bad input fails here, not
    at the first view."""
    if not mirror and not shift:
        return iter([images])
    if images.ndim != 4:  # a mirror or a shift of feature rows would silently mix features
        raise ValueError(f"test-time mirror and shift views need images [n, c, h, w], got "
                         f"rows of shape {list(images.shape[1:])}")
    x = torch.from_numpy(np.ascontiguousarray(images))
    return (v.numpy() for v in iter_tta_views(x, mirror, shift))


@torch.no_grad()
def embed(
    model: ContrastiveModel,
    images: np.ndarray | torch.Tensor,
    which: str = "encoder",
    device: torch.device | None = None,
    batch_size: int = 1024,
) -> np.ndarray:
    """uint8 [n, c, h, w] -> float32 [n, d]: the encoder's output, its trunk's
    (`encoder_part`) or the projector's. Projector outputs are L2-normalised (the
    geometry the contrastive loss shapes)."""
    if which not in ("encoder", "trunk", "projector"):
        raise ValueError(f"which must be 'encoder', 'trunk' or 'projector', got {which!r}")
    device = device or torch.device("cpu")
    model.eval().to(device)
    x_all = torch.as_tensor(images)
    out = []
    for start in range(0, len(x_all), batch_size):
        x = normalize(to_unit_float(x_all[start:start + batch_size])).to(device)
        h = encoder_part(model.encoder, "trunk" if which == "trunk" else "encoder")(x)
        if which == "projector":
            h = F.normalize(model.head(h), dim=1)
        out.append(h)  # on the device; read back once, below
    return torch.cat(out).cpu().numpy()


@torch.no_grad()
def augmented_projections(
    model: ContrastiveModel,
    images: np.ndarray | torch.Tensor,
    augment,
    views: int,
    generator: torch.Generator,
    device: torch.device | None = None,
    batch_size: int = 1024,
) -> np.ndarray:
    """L2-normalised projections of `views` random augmentations of every image:
    float32 [n, views, d] (for the prototype-bias diagnostic)."""
    device = device or torch.device("cpu")
    model.eval().to(device)
    x_all = torch.as_tensor(images)
    out = []
    for start in range(0, len(x_all), batch_size):
        x = to_unit_float(x_all[start:start + batch_size])
        per_view = [F.normalize(model(normalize(augment(x, generator)).to(device)), dim=1).cpu()
                    for _ in range(views)]
        out.append(torch.stack(per_view, dim=1))
    return torch.cat(out).numpy().astype(np.float32)


def input_features(images: np.ndarray | torch.Tensor) -> np.ndarray:
    """The encoder's input itself, flattened: float32 [n, prod(shape)] (for the kNN probe
    a learned representation should beat)."""
    x = normalize(to_unit_float(torch.as_tensor(images)))
    return x.reshape(len(x), -1).numpy().astype(np.float32, copy=False)
