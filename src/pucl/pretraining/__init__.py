"""Pretraining methods, registered in PRETRAINING_METHODS (`pretrain.method`): contrastive
(the loss of `pretrain.loss`), ncpu and ssc; `loop` is the epoch loop they share."""

from pucl.pretraining.base import (
    PRETRAINING_METHODS,
    PretrainingMethod,
    PretrainJob,
    PretrainResult,
)

__all__ = ["PRETRAINING_METHODS", "PretrainJob", "PretrainResult", "PretrainingMethod"]
