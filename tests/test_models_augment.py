"""Encoders and batched augmentations."""

from __future__ import annotations

import pytest
import torch

from pucl.data.augment import AffineJitter
from pucl.errors import ParamsError
from pucl.models import ContrastiveModel, make_encoder


@pytest.mark.parametrize("name, shape", [("lenet5", (1, 28, 28)), ("lenet5", (3, 32, 32)),
                                         ("mlp", (1, 28, 28)), ("mlp", (20,))])
def test_encoders_fit_their_inputs(name, shape):
    model = ContrastiveModel(name, shape, proj_hidden=32, proj_dim=16)
    out = model(torch.randn(4, *shape))
    assert out.shape == (4, 16)


def test_lenet_refuses_tiny_images():
    with pytest.raises(ParamsError, match="at least 20x20"):
        make_encoder("lenet5", (1, 8, 8))
    with pytest.raises(ParamsError, match="allowed: lenet5, mlp"):
        make_encoder("vgg", (1, 28, 28))


def test_augmentation_is_seeded_in_range_and_random_per_image():
    x = torch.rand(8, 1, 28, 28)
    aug = AffineJitter()
    a = aug(x, torch.Generator().manual_seed(0))
    b = aug(x, torch.Generator().manual_seed(0))
    c = aug(x, torch.Generator().manual_seed(1))
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert a.shape == x.shape and a.min() >= 0 and a.max() <= 1


def test_zero_strength_augmentation_is_the_identity():
    x = torch.rand(4, 1, 28, 28)
    aug = AffineJitter(degrees=0, translate=0, scale_min=1, scale_max=1, brightness=0,
                       contrast=0)
    assert torch.allclose(aug(x, torch.Generator().manual_seed(0)), x, atol=1e-5)


def test_hflip_one_mirrors_every_image_and_zero_leaves_the_stream_alone():
    x = torch.rand(4, 1, 28, 28)
    still = dict(degrees=0, translate=0, scale_min=1, scale_max=1, brightness=0, contrast=0)
    mirrored = AffineJitter(**still, hflip=1.0)(x, torch.Generator().manual_seed(0))
    assert torch.allclose(mirrored, x.flip(-1), atol=1e-5)
    # hflip = 0 draws nothing extra (six uniforms per image), so results from before the
    # option existed are unchanged
    g = torch.Generator().manual_seed(3)
    AffineJitter(hflip=0.0)(x, g)
    expected = torch.Generator().manual_seed(3)
    for _ in range(6):
        torch.rand(4, generator=expected)
    assert torch.equal(torch.rand(3, generator=g), torch.rand(3, generator=expected))
