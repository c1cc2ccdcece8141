"""Contrastive objectives on one shared, vectorised similarity core."""

from pucl.losses.contrastive import LOSSES, PUCL, SSCL, ContrastiveLoss, make_loss

__all__ = ["LOSSES", "PUCL", "SSCL", "ContrastiveLoss", "make_loss"]
