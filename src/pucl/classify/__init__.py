"""Downstream classifiers on frozen features."""

from pucl.classify.deployable import PUClassifier
from pucl.classify.linear import LinearHead, LinearSettings, train_linear_head

__all__ = ["LinearHead", "LinearSettings", "PUClassifier", "train_linear_head"]
