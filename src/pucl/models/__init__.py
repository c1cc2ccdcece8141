"""Encoders and heads."""

from pucl.models.encoders import ENCODERS, ContrastiveModel, ProjectionHead, make_encoder

__all__ = ["ENCODERS", "ContrastiveModel", "ProjectionHead", "make_encoder"]
