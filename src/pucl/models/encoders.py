"""Encoders g(x) and the projection head h(.) of contrastive pretraining.

Encoders live in the ENCODERS registry (`pretrain.encoder` names one): a new encoder is a
class or function taking the input shape, registered here, with an `out_dim` attribute.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from pucl.errors import ParamsError
from pucl.registry import Registry

ENCODERS = Registry("encoder", "pucl.models")


@ENCODERS.register("lenet5")
class LeNet5(nn.Module):
    """LeNet-5 with batch norm, for 1x28x28 or 1x32x32 inputs; 84-d features."""

    def __init__(self, in_shape: tuple[int, int, int], channels: tuple[int, int] = (6, 16),
                 name: str = "lenet5"):
        super().__init__()
        c, h, w = in_shape
        if h < 20 or w < 20:
            raise ParamsError(f"encoder {name} needs images of at least 20x20, got {h}x{w}")
        c1, c2 = channels
        self.features = nn.Sequential(
            nn.Conv2d(c, c1, 5), nn.BatchNorm2d(c1), nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.Conv2d(c1, c2, 5), nn.BatchNorm2d(c2), nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.Flatten(),
        )
        def side(n: int) -> int:  # two (conv 5x5, max-pool 2) blocks
            return ((n - 4) // 2 - 4) // 2

        flat = c2 * side(h) * side(w)
        self.fc = nn.Sequential(
            nn.Linear(flat, 120), nn.BatchNorm1d(120), nn.ReLU(inplace=True),
            nn.Linear(120, 84), nn.BatchNorm1d(84), nn.ReLU(inplace=True),
        )
        self.out_dim = 84

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features(x))


@ENCODERS.register("lenet5_wide")
def lenet5_wide(in_shape: tuple[int, int, int]) -> LeNet5:
    """LeNet-5 with 16 and 32 convolution channels (lenet5: 6 and 16); 84-d features.

    Its conv trunk is 512-d on 28x28 inputs: the best kNN probe on F-MNIST-II
    (reports/encoder)."""
    return LeNet5(in_shape, channels=(16, 32), name="lenet5_wide")


@ENCODERS.register("mlp")
class MLPEncoder(nn.Module):
    """Flatten + two hidden layers; works for any input shape (images or tabular). The
    input BatchNorm standardises raw tabular features, whose scales are the user's."""

    def __init__(self, in_shape: tuple[int, ...], hidden: int = 512, out_dim: int = 256):
        super().__init__()
        self.net = nn.Sequential(
            nn.Flatten(),
            nn.BatchNorm1d(math.prod(in_shape)),
            nn.Linear(math.prod(in_shape), hidden), nn.BatchNorm1d(hidden), nn.ReLU(inplace=True),
            nn.Linear(hidden, out_dim), nn.BatchNorm1d(out_dim), nn.ReLU(inplace=True),
        )
        self.out_dim = out_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def _conv_bn(c_in: int, c_out: int, kernel: int = 3, stride: int = 1) -> list[nn.Module]:
    return [nn.Conv2d(c_in, c_out, kernel, stride, kernel // 2, bias=False),
            nn.BatchNorm2d(c_out), nn.ReLU(inplace=True)]


@ENCODERS.register("cnn7")
class CNN7(nn.Module):
    """The all-convolutional network of the PU literature (Kiryo et al. 2017; Chen et al.
    2020a) cut to its seven convolutions: 3x3 x 96 (x2), 3x3 x 96 stride 2, 3x3 x 192 (x2),
    3x3 x 192 stride 2, 1x1 x 192, each with BN + ReLU, then global average pooling:
    192-d features for any image size of at least 8x8."""

    def __init__(self, in_shape: tuple[int, int, int]):
        super().__init__()
        c, h, w = in_shape
        if h < 8 or w < 8:
            raise ParamsError(f"encoder cnn7 needs images of at least 8x8, got {h}x{w}")
        self.net = nn.Sequential(
            *_conv_bn(c, 96), *_conv_bn(96, 96), *_conv_bn(96, 96, stride=2),
            *_conv_bn(96, 192), *_conv_bn(192, 192), *_conv_bn(192, 192, stride=2),
            *_conv_bn(192, 192, kernel=1), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )
        self.out_dim = 192

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


@ENCODERS.register("resnet18")
class ResNet18(nn.Module):
    """torchvision's ResNet-18 with the CIFAR stem (3x3 stride-1 first convolution, no
    max-pool), so 32x32 images keep their resolution; 512-d features."""

    def __init__(self, in_shape: tuple[int, int, int]):
        super().__init__()
        from torchvision.models import resnet18

        c, h, w = in_shape
        if h < 8 or w < 8:
            raise ParamsError(f"encoder resnet18 needs images of at least 8x8, got {h}x{w}")
        net = resnet18(weights=None)
        net.conv1 = nn.Conv2d(c, 64, 3, 1, 1, bias=False)
        net.maxpool = nn.Identity()
        net.fc = nn.Identity()
        self.net = net
        self.out_dim = 512

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class ProjectionHead(nn.Module):
    """Two linear layers with BN + ReLU between them (paper 000, section 9)."""

    def __init__(self, in_dim: int, hidden: int = 256, out_dim: int = 128):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(in_dim, hidden), nn.BatchNorm1d(hidden), nn.ReLU(inplace=True),
            nn.Linear(hidden, out_dim),
        )

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.net(h)


def make_encoder(name: str, in_shape: tuple[int, ...]) -> nn.Module:
    return ENCODERS.create(name, in_shape=in_shape)


class ContrastiveModel(nn.Module):
    """Encoder + projection head; `embed` gives g(x), `forward` gives h(g(x))."""

    def __init__(self, encoder_name: str, in_shape: tuple[int, ...], proj_hidden: int,
                 proj_dim: int):
        super().__init__()
        # the architecture, so that a like model can be built (recipe.head_start)
        self.encoder_name, self.in_shape = encoder_name, tuple(in_shape)
        self.proj_hidden, self.proj_dim = proj_hidden, proj_dim
        self.encoder = make_encoder(encoder_name, in_shape)
        self.head = ProjectionHead(self.encoder.out_dim, proj_hidden, proj_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x))
