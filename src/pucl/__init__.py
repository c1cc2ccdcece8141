"""pucl: contrastive learning from positive and unlabeled data."""

__version__ = "0.1.0"
