"""Loading the models that stages hand to each other, with one-line errors."""

from __future__ import annotations

import copy
from pathlib import Path

from torch import nn

from pucl.classify.base import LinearHead
from pucl.classify.heads import rebuild
from pucl.errors import DataError
from pucl.io import read_torch
from pucl.models import ContrastiveModel


def _load(path: Path, what: str, stage: str, key: str = "state_dict") -> dict:
    try:
        saved = read_torch(path, what, f"write it again with the {stage} stage (pucl repro)")
    except FileNotFoundError:
        raise DataError(f"missing input {path}: run the {stage} stage first") from None
    except DataError:
        raise
    except Exception as exc:
        raise DataError(f"cannot read {what} {path}: {type(exc).__name__}: {exc}") from None
    if not isinstance(saved, dict):
        raise DataError(f"{path} is not a {what} written by the {stage} stage")
    # heads written before they had kinds hold a bare "state_dict" instead of "head"
    legacy_head = key == "head" and "state_dict" in saved
    if key not in saved and not legacy_head:
        raise DataError(f"{path} is not a {what} written by the {stage} stage")
    return saved


def describe_model(model: ContrastiveModel) -> dict:
    """A model as `model.pt` holds it: its architecture and weights, as plain values and
    tensors (read back by `build_model`)."""
    return {"state_dict": model.state_dict(), "encoder": model.encoder_name,
            "in_shape": list(model.in_shape), "proj_hidden": model.proj_hidden,
            "proj_dim": model.proj_dim}


def build_model(saved: dict, path: Path) -> ContrastiveModel:
    """The model a `describe_model` dict read from `path` stands for."""
    return _build(saved, saved["state_dict"], path)


def _build(saved: dict, state_dict: dict, path: Path) -> ContrastiveModel:
    try:
        model = ContrastiveModel(saved["encoder"], tuple(saved["in_shape"]),
                                 saved["proj_hidden"], saved["proj_dim"])
        model.load_state_dict(state_dict)
    except Exception as exc:
        raise DataError(f"model {path} does not match its architecture: {exc}") from None
    return model.eval()


def load_model(path: Path) -> ContrastiveModel:
    """The pretrained encoder + projection head (with pretrain.members > 1, the first)."""
    saved = _load(path, "model", "pretrain")
    return _build(saved, saved["state_dict"], path)


def load_models(path: Path, start: int = 0) -> list[ContrastiveModel]:
    """The pretrained encoders + projection heads (pretrain.members of them), first
    first; from member `start` on."""
    saved = _load(path, "model", "pretrain")
    return [_build(saved, member["state_dict"], path)
            for member in [saved, *saved.get("other_members", [])][start:]]


def classifier_features(head_path: Path) -> str:
    """Which features the classifier head reads (`classifier.features`; heads saved
    before the option existed read the encoder's output)."""
    return _load(head_path, "classifier", "train_classifier", "head").get("features", "encoder")


def _with_encoder(pretrained: ContrastiveModel, state: dict | None,
                  head_path: Path) -> ContrastiveModel:
    if state is None:
        return pretrained
    model = copy.deepcopy(pretrained)
    try:
        model.encoder.load_state_dict(state)
    except Exception as exc:
        raise DataError(f"the fine-tuned encoder in {head_path} does not match the "
                        f"pretrained model: {exc}") from None
    return model.eval()


def load_classifier(head_path: Path, pretrained: list[ContrastiveModel]
                    ) -> list[tuple[ContrastiveModel, nn.Module]]:
    """Every member of the classifier as (the model whose encoder feeds it, its head):
    one per pretrained encoder (`load_models`), or with `classifier.shipped: ensemble`
    one per fold and encoder, each saying which pretrained encoder it started from. A
    pretrained model's own object comes back where train_classifier did not fine-tune it."""
    saved = _load(head_path, "classifier", "train_classifier", "head")
    specs = [saved, *saved.get("other_members", [])]
    starts = [spec.get("encoder", k) for k, spec in enumerate(specs)]
    if sorted(set(starts)) != list(range(len(pretrained))):
        raise DataError(f"{head_path} holds classifiers of {len(set(starts))} encoder(s) "
                        f"for {len(pretrained)} pretrained encoder(s): rerun train_classifier")
    return [(_with_encoder(pretrained[start], spec.get("encoder_state"), head_path),
             _rebuild_head(spec, head_path)) for start, spec in zip(starts, specs,
                                                                    strict=True)]


def load_method_heads(path: Path) -> list[nn.Module | None]:
    """The classifier a whole training method (NcPU, SSC) learned with each encoder, None
    for an encoder whose method learned none (contrastive pretraining)."""
    saved = _load(path, "model", "pretrain")
    heads = []
    for member in [saved, *saved.get("other_members", [])]:
        try:
            heads.append(rebuild(member["classifier"]) if member.get("classifier") else None)
        except Exception as exc:
            raise DataError(f"the classifier in {path} is inconsistent: {exc}") from None
    return heads


def _rebuild_head(saved: dict, path: Path) -> nn.Module:
    try:
        if "head" in saved:
            return rebuild(saved["head"])
        head = LinearHead(saved["dim"])
        head.load_state_dict(saved["state_dict"])
    except Exception as exc:
        raise DataError(f"classifier {path} is inconsistent: {exc}") from None
    return head.eval()
