"""Loading the models that stages hand to each other, with one-line errors."""

from __future__ import annotations

import copy
from pathlib import Path

import torch
from torch import nn

from pucl.classify.base import LinearHead
from pucl.classify.heads import rebuild
from pucl.errors import DataError
from pucl.models import ContrastiveModel


def _load(path: Path, what: str, stage: str, key: str = "state_dict") -> dict:
    try:
        saved = torch.load(path, map_location="cpu", weights_only=False)
    except FileNotFoundError:
        raise DataError(f"missing input {path}: run the {stage} stage first") from None
    except Exception as exc:
        raise DataError(f"cannot read {what} {path}: {type(exc).__name__}: {exc}") from None
    if not isinstance(saved, dict):
        raise DataError(f"{path} is not a {what} written by the {stage} stage")
    # heads written before they had kinds hold a bare "state_dict" instead of "head"
    legacy_head = key == "head" and "state_dict" in saved
    if key not in saved and not legacy_head:
        raise DataError(f"{path} is not a {what} written by the {stage} stage")
    return saved


def load_model(path: Path) -> ContrastiveModel:
    """The pretrained encoder + projection head."""
    saved = _load(path, "model", "pretrain")
    try:
        model = ContrastiveModel(saved["encoder"], tuple(saved["in_shape"]),
                                 saved["proj_hidden"], saved["proj_dim"])
        model.load_state_dict(saved["state_dict"])
    except Exception as exc:
        raise DataError(f"model {path} does not match its architecture: {exc}") from None
    return model.eval()


def classifier_features(head_path: Path) -> str:
    """Which features the classifier head reads (`classifier.features`; heads saved
    before the option existed read the encoder's output)."""
    return _load(head_path, "classifier", "train_classifier", "head").get("features", "encoder")


def load_classifier_model(head_path: Path, pretrained: ContrastiveModel) -> ContrastiveModel:
    """The model whose encoder feeds the classifier: `pretrained` itself unless
    train_classifier fine-tuned the encoder, else a copy with the fine-tuned weights (so
    callers can skip embedding twice with one model)."""
    state = _load(head_path, "classifier", "train_classifier", "head").get("encoder_state")
    if state is None:
        return pretrained
    model = copy.deepcopy(pretrained)
    try:
        model.encoder.load_state_dict(state)
    except Exception as exc:
        raise DataError(f"the fine-tuned encoder in {head_path} does not match the "
                        f"pretrained model: {exc}") from None
    return model.eval()


def load_method_head(path: Path) -> nn.Module:
    """The classifier a whole training method (NcPU, SSC) learned with its encoder."""
    saved = _load(path, "model", "pretrain")
    if saved.get("classifier") is None:
        raise DataError(f"{path} holds no classifier: classifier.objective 'method_head' "
                        "needs pretrain.method ncpu or ssc (rerun pretrain)")
    try:
        return rebuild(saved["classifier"])
    except Exception as exc:
        raise DataError(f"the classifier in {path} is inconsistent: {exc}") from None


def load_head(path: Path) -> nn.Module:
    """The downstream classifier (a linear or a prototype head)."""
    saved = _load(path, "classifier", "train_classifier", "head")
    try:
        if "head" in saved:
            return rebuild(saved["head"])
        head = LinearHead(saved["dim"])
        head.load_state_dict(saved["state_dict"])
    except Exception as exc:
        raise DataError(f"classifier {path} is inconsistent: {exc}") from None
    return head.eval()
