"""The recipe's pretraining step: encoders and their projection heads."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from pucl.data.augment import make_augment
from pucl.losses import CONTRASTIVE_LOSSES
from pucl.models import ContrastiveModel
from pucl.pretraining import PRETRAINING_METHODS, PretrainJob, PretrainResult
from pucl.recipe import Recipe, entry_settings
from pucl.recipe.by_input import AUTO, for_inputs
from pucl.runtime.device import seeded_generator

# LeNet-5 takes greyscale images of any side it can convolve twice (20 pixels) and stays
# cheap on a CPU up to 64. On 1,500 greyscale 24 x 24 images, cnn7 pretrained at 65
# images/s on 2 cores (27 minutes); padded to 28 x 28, lenet5's whole run took under 9
# minutes
LENET5_SIDES = (20, 64)


def resolve_encoder(name: str, in_shape: Sequence[int]) -> str:
    """`auto`: mlp for feature rows, lenet5 for greyscale images of 20 to 64 pixels a
    side (MNIST's 28 x 28 among them), cnn7 for colour and other images."""
    if name != "auto":
        return name
    if len(in_shape) == 1:
        return "mlp"
    channels = in_shape[0] if len(in_shape) == 3 else 1
    low, high = LENET5_SIDES
    small = all(low <= side <= high for side in in_shape[-2:])
    return "lenet5" if channels == 1 and small else "cnn7"


def contrastive_model(recipe: Recipe, in_shape: Sequence[int]) -> ContrastiveModel:
    p = recipe.pretrain
    return ContrastiveModel(resolve_encoder(p.encoder, in_shape), tuple(in_shape),
                            p.proj_hidden, p.proj_dim)


def pretraining_method(recipe: Recipe):
    """pretrain.method, built with its settings (pretrain.<method>)."""
    entry = PRETRAINING_METHODS.get(recipe.pretrain.method)
    return entry.build(entry_settings(recipe.pretrain, "pretrain", entry))


def needs_prior(recipe: Recipe) -> bool:
    """Whether pretraining reads the class prior (PUNCE, DCL, SSC's prior-ranked negatives)."""
    return pretraining_method(recipe).uses_prior(recipe.pretrain.loss)


def contrastive_loss(recipe: Recipe, prior: float | None) -> nn.Module:
    """pretrain.loss with its settings (pretrain.<loss>, when it has any), the temperature
    and, for PUNCE and DCL, the class prior."""
    p = recipe.pretrain
    if p.loss == AUTO:  # a caller skipped pucl.recipe.by_input.for_inputs
        raise ValueError("pretrain.loss is still 'auto': decide the recipe for its inputs "
                         "first (pucl.recipe.by_input.for_inputs)")
    entry = CONTRASTIVE_LOSSES.get(p.loss)
    return entry.build(entry_settings(p, "pretrain", entry), temperature=p.temperature,
                       pi=prior)


# pretrain settings that say which encoders to train, not how one trains: an encoder's
# identity has its own seed instead, so member k of a run is the same encoder as the
# single run with that seed (and shares its cache entry)
MEMBER_SETTINGS = ("seed", "members")


def encoder_identity(recipe: Recipe, seed: int | None = None) -> dict:
    """What of the recipe decides the encoder that one pretraining with `seed` (None:
    the recipe's) trains: the pretraining settings less MEMBER_SETTINGS, and the seeds.
    The pretraining cache's fingerprint and the sweep's shared encoders both key on it."""
    identity = {"pretrain": {k: v for k, v in recipe.pretrain.model_dump().items()
                             if k not in MEMBER_SETTINGS}, "seed": recipe.seed}
    if seed is not None and seed != recipe.seed:  # else the key encoders were cached under
        identity["pretrain_seed"] = seed
    return identity


def member_seeds(recipe: Recipe) -> list[int]:
    """The pretraining seed of each encoder (pretrain.members of them): pretrain.seed
    (else the recipe's seed), then one more for each further member."""
    first = recipe.seed if recipe.pretrain.seed is None else recipe.pretrain.seed
    return [first + k for k in range(recipe.pretrain.members)]


def pretrain(recipe: Recipe, images: torch.Tensor, is_labeled: torch.Tensor,
             prior: float | None, seed: int, device: torch.device, progress: bool = False,
             resume: dict | None = None, on_epoch=None
             ) -> tuple[ContrastiveModel, PretrainResult]:
    """One encoder + projection head, pretrained with `seed` (weights, batches and
    augmentations); `resume` / `on_epoch`: the checkpoint contract of the training loop."""
    recipe = for_inputs(recipe, tuple(images.shape[1:]), len(images))  # pretrain.epochs: auto
    p = recipe.pretrain
    torch.manual_seed(seed)  # weights initialise identically on every run
    model = contrastive_model(recipe, images.shape[1:])
    job = PretrainJob(model, contrastive_loss(recipe, prior), images, is_labeled,
                      make_augment(p.augment, images.dim() == 2), p.epochs, p.batch_size,
                      p.lr, p.weight_decay, p.proj_dim, p.proj_hidden, prior,
                      seeded_generator(seed, device), device, resume=resume,
                      on_epoch=on_epoch,
                      progress=progress)
    result = pretraining_method(recipe).train(job)
    return model.cpu().eval(), result
