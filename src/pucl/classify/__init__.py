"""Downstream classifiers: a linear head on frozen features, optionally fine-tuned with
its encoder."""

from pucl.classify.deployable import PUClassifier
from pucl.classify.finetune import FinetuneSettings, finetune
from pucl.classify.linear import LinearHead, LinearSettings, train_linear_head, train_pu_head
from pucl.classify.pu_risk import OBJECTIVES, PU_RISKS, pu_risk

__all__ = ["OBJECTIVES", "PU_RISKS", "FinetuneSettings", "LinearHead", "LinearSettings",
           "PUClassifier", "finetune", "pu_risk", "train_linear_head", "train_pu_head"]
