"""Downstream classifiers on frozen features."""

from pucl.classify.deployable import PUClassifier
from pucl.classify.linear import LinearHead, LinearSettings, train_linear_head, train_pu_head
from pucl.classify.pu_risk import OBJECTIVES, PU_RISKS, pu_risk

__all__ = ["OBJECTIVES", "PU_RISKS", "LinearHead", "LinearSettings", "PUClassifier", "pu_risk",
           "train_linear_head", "train_pu_head"]
