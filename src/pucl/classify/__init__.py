"""Downstream classifiers on frozen features."""

from pucl.classify.linear import LinearHead, LinearSettings, train_linear_head

__all__ = ["LinearHead", "LinearSettings", "train_linear_head"]
