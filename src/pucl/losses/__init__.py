"""Contrastive objectives on one shared, vectorised similarity core."""

from pucl.losses.contrastive import (
    CONTRASTIVE_LOSSES,
    DCL,
    MCL,
    NONNEG,
    PUCL,
    PUNCE,
    SCLPU,
    SSCL,
    Balanced,
    BalancedPUCL,
    ContrastiveLoss,
    make_loss,
    nonnegative,
)

__all__ = ["DCL", "CONTRASTIVE_LOSSES", "MCL", "NONNEG", "PUCL", "PUNCE", "SCLPU", "SSCL",
           "Balanced", "BalancedPUCL", "ContrastiveLoss", "make_loss", "nonnegative"]
