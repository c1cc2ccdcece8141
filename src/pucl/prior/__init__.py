"""Class-prior (mixture proportion) estimation."""

from pucl.prior.km2 import PriorEstimate, estimate_prior, prepare_features

__all__ = ["PriorEstimate", "estimate_prior", "prepare_features"]
