"""Contrastive objectives on one shared, vectorised similarity core."""

from pucl.losses.contrastive import (
    CONTRASTIVE_LOSSES,
    DCL,
    MCL,
    PUCL,
    PUNCE,
    SCLPU,
    SSCL,
    Balanced,
    BalancedPUCL,
    ContrastiveLoss,
    make_loss,
)

__all__ = ["DCL", "CONTRASTIVE_LOSSES", "MCL", "PUCL", "PUNCE", "SCLPU", "SSCL",
           "Balanced", "BalancedPUCL", "ContrastiveLoss", "make_loss"]
