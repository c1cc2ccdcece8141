"""Encoders and batched augmentations."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pucl.data.augment import AffineJitter
from pucl.data.views import translate, tta_views
from pucl.errors import ParamsError
from pucl.models import ContrastiveModel, make_encoder


@pytest.mark.parametrize("name, shape, feature_dim", [
    ("lenet5", (1, 28, 28), 84), ("lenet5", (3, 32, 32), 84), ("lenet5_wide", (1, 28, 28), 84),
    ("cnn7", (3, 32, 32), 192),
    ("cnn7", (3, 96, 96), 192), ("resnet18", (3, 32, 32), 512), ("resnet18", (1, 28, 28), 512),
    ("mlp", (1, 28, 28), 256), ("mlp", (20,), 256)])
def test_encoders_fit_their_inputs(name, shape, feature_dim):
    model = ContrastiveModel(name, shape, proj_hidden=32, proj_dim=16)
    x = torch.randn(4, *shape)
    assert model(x).shape == (4, 16)
    assert model.encoder(x).shape == (4, feature_dim) == (4, model.encoder.out_dim)


def test_cnn7_has_seven_convolutions_and_resnet18_keeps_cifar_resolution():
    cnn = make_encoder("cnn7", (3, 32, 32))
    assert sum(isinstance(m, torch.nn.Conv2d) for m in cnn.modules()) == 7
    resnet = make_encoder("resnet18", (3, 32, 32))
    stem = resnet.net.conv1
    assert stem.kernel_size == (3, 3) and stem.stride == (1, 1)
    assert isinstance(resnet.net.maxpool, torch.nn.Identity)
    # the CIFAR stem leaves 4x4 maps before the pooling (32 / 8), not 1x1
    trunk = torch.nn.Sequential(*list(resnet.net.children())[:-2])
    assert trunk(torch.randn(2, 3, 32, 32)).shape[-2:] == (4, 4)


def test_lenet_refuses_tiny_images():
    with pytest.raises(ParamsError, match="at least 20x20"):
        make_encoder("lenet5", (1, 8, 8))
    with pytest.raises(ParamsError, match="lenet5_wide needs images of at least 20x20"):
        make_encoder("lenet5_wide", (1, 8, 8))
    with pytest.raises(ParamsError,
                       match="unknown encoder 'vgg'.*allowed: cnn7, lenet5, lenet5_wide, mlp"):
        make_encoder("vgg", (1, 28, 28))


def test_lenet5_wide_is_lenet5_with_16_and_32_channels():
    def channels(encoder):
        return [m.out_channels for m in encoder.modules() if isinstance(m, torch.nn.Conv2d)]

    narrow, wide = make_encoder("lenet5", (1, 28, 28)), make_encoder("lenet5_wide", (1, 28, 28))
    assert channels(narrow) == [6, 16] and channels(wide) == [16, 32]
    # the trunk (what classifier.features: trunk reads) is 32 maps of 4x4 on 28x28 inputs
    assert wide.features(torch.randn(2, 1, 28, 28)).shape == (2, 32 * 4 * 4)
    assert [type(m) for m in wide.modules()] == [type(m) for m in narrow.modules()]


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


@pytest.mark.parametrize("dx, dy", [(0, 0), (2, 0), (-1, 0), (0, 3), (1, -2), (-2, -1), (6, 0)])
def test_translate_moves_every_pixel_and_fills_black(dx, dy):
    """Pixel by pixel: out[i, j] = x[i - dy, j - dx] inside the frame, 0 elsewhere."""
    x = torch.randint(1, 255, (2, 3, 5, 6), dtype=torch.uint8)
    out = translate(x, dx, dy)
    for i in range(5):
        for j in range(6):
            src_i, src_j = i - dy, j - dx
            inside = 0 <= src_i < 5 and 0 <= src_j < 6
            want = x[..., src_i, src_j] if inside else torch.zeros(2, 3, dtype=torch.uint8)
            assert torch.equal(out[..., i, j], want), (i, j)


def test_test_time_views_are_the_image_first_then_its_shifts_and_mirror():
    x = torch.rand(3, 1, 8, 8)
    assert len(tta_views(x, False, 0)) == 1 and tta_views(x, False, 0)[0] is x
    views = tta_views(x, True, 2)
    assert len(views) == 18 and torch.equal(views[0], x) and torch.equal(views[9], x.flip(-1))
    offsets = {(dx, dy) for dx in (-2, 0, 2) for dy in (-2, 0, 2)}
    assert {tuple(v.tolist()) for v in
            (torch.stack([view.flatten() for view in views[:9]]))} == \
        {tuple(translate(x, dx, dy).flatten().tolist()) for dx, dy in offsets}


def test_feature_noise_scales_with_each_feature_and_masks_to_the_mean():
    from pucl.data.augment import FeatureNoise

    g = torch.Generator().manual_seed(0)
    x = torch.randn(4000, 3, generator=g) * torch.tensor([0.01, 1.0, 100.0])
    noisy = FeatureNoise(noise=0.5, drop=0.0)(x, torch.Generator().manual_seed(1))
    # the added noise has 0.5 of each feature's own spread, whatever its scale
    ratio = (noisy - x).std(0) / x.std(0)
    assert torch.allclose(ratio, torch.full((3,), 0.5), atol=0.03), ratio
    masked = FeatureNoise(noise=0.0, drop=1.0)(x, g)
    assert torch.allclose(masked, x.mean(0, keepdim=True).expand_as(x))
    assert torch.equal(FeatureNoise(0.0, 0.0)(x, g), x)
    half = FeatureNoise(noise=0.0, drop=0.3)(x, g)
    assert abs((half != x).float().mean().item() - 0.3) < 0.02


def test_mlp_standardises_tabular_features_of_any_scale():
    model = ContrastiveModel("mlp", (5,), 32, 8).train()
    x = torch.randn(64, 5) * 1000.0 + 50.0
    first = model.encoder.net[1]  # the input BatchNorm
    assert isinstance(first, torch.nn.BatchNorm1d)
    assert torch.allclose(first(x).mean(0), torch.zeros(5), atol=1e-4)
    assert model(x).shape == (64, 8)


def test_make_augment_picks_by_input_kind():
    from pucl.data.augment import FeatureNoise, make_augment
    from pucl.recipe.settings import AugmentParams

    params = AugmentParams(degrees=0.0, hflip=0.5, feature_noise=0.2, feature_drop=0.0)
    assert make_augment(params, tabular=True) == FeatureNoise(0.2, 0.0)
    jitter = make_augment(params, tabular=False)
    assert isinstance(jitter, AffineJitter) and jitter.hflip == 0.5 and jitter.degrees == 0.0


def test_scoring_views_come_one_at_a_time_and_feature_rows_are_refused_at_once():
    from pucl.models.features import scoring_views

    images = np.random.default_rng(0).integers(0, 256, (4, 1, 8, 8), dtype=np.uint8)
    views = scoring_views(images, True, 1)
    assert not isinstance(views, list | tuple)  # a caller never holds all 18 copies
    assert np.array_equal(next(views), images)
    rest = list(views)
    assert len(rest) == 17 and np.array_equal(rest[8], images[..., ::-1])
    assert all(view.dtype == np.uint8 for view in rest)
    with pytest.raises(ValueError, match="need images"):  # before any view is asked for
        scoring_views(np.zeros((4, 5), np.float32), True, 0)


@pytest.mark.parametrize("shape, expected", [
    ((10,), "mlp"), ((1, 28, 28), "lenet5"), ((1, 24, 24), "lenet5"), ((1, 20, 64), "lenet5"),
    ((1, 32, 32), "lenet5"), ((1, 19, 28), "cnn7"), ((1, 96, 96), "cnn7"),
    ((3, 28, 28), "cnn7"), ((3, 32, 32), "cnn7")])
def test_auto_takes_lenet5_for_small_greyscale_images_of_any_size(shape, expected):
    """24 x 24 greyscale images once got cnn7, several times slower on a CPU; lenet5
    needs 20 pixels a side and takes colour images only when asked."""
    from pucl.recipe.pretraining import resolve_encoder

    name = resolve_encoder("auto", shape)
    assert name == expected
    if len(shape) == 3:  # the encoder auto names can be built for that shape
        assert make_encoder(name, shape)(torch.zeros(2, *shape)).shape[0] == 2
    assert resolve_encoder("cnn7", (1, 28, 28)) == "cnn7"  # a named encoder is kept
