"""Contrastive objectives on one shared, vectorised similarity core."""

from pucl.losses.contrastive import (
    DCL,
    LOSSES,
    MCL,
    NONNEG,
    PRIOR_LOSSES,
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

__all__ = ["DCL", "LOSSES", "MCL", "NONNEG", "PRIOR_LOSSES", "PUCL", "PUNCE", "SCLPU", "SSCL",
           "Balanced", "BalancedPUCL", "ContrastiveLoss", "make_loss", "nonnegative"]
