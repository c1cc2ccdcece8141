"""KM1 and KM2 (Ramaswamy, Scott and Tewari, ICML 2016) as prior estimators: PCA on both
samples, a seeded subsample of each side, then the kernel mean embedding estimate of
`pucl.prior.km2`. Both come out of one computation; the entry picks which is `prior_`.
Settings: params.yaml `prior.km` (shared by km1 and km2)."""

from __future__ import annotations

import numpy as np
from pydantic import Field, field_validator

from pucl.prior.base import PRIOR_ESTIMATORS, PriorEstimator
from pucl.prior.km2 import estimate_prior, prepare_features
from pucl.registry import EntryParams

# sigma = multiplier x the median pairwise distance; 17 log-spaced values over [0.1, 10]
DEFAULT_MULTIPLIERS = tuple(round(0.1 * 10 ** (k / 8), 4) for k in range(17))


class KernelMeanParams(EntryParams):
    pca_dim: int = Field(50, ge=1, description="PCA components fitted on U and P together")
    max_per_side: int = Field(2000, ge=10, description="subsample of each side")
    bandwidth_multipliers: list[float] = Field(
        default_factory=lambda: list(DEFAULT_MULTIPLIERS),
        description="sigma grid, in median distances; the MMD's maximiser is kept")
    lambda_max: float = Field(8.0, gt=1.0)
    epsilon: float = Field(0.04, gt=0.0, lt=1.0, description="bisection tolerance on lambda")
    refine_bandwidth: bool = Field(True, description="golden-section search of the MMD peak")

    @field_validator("bandwidth_multipliers")
    @classmethod
    def _positive_grid(cls, v: list[float]) -> list[float]:
        if not v or any((not np.isfinite(m)) or m <= 0 for m in v):
            raise ValueError(f"must be a non-empty list of positive numbers, got {v}")
        return v


class _KernelMean(PriorEstimator):
    pick = "km2"

    def __init__(self, pca_dim: int = 50, max_per_side: int = 2000,
                 bandwidth_multipliers: tuple[float, ...] | list[float] = DEFAULT_MULTIPLIERS,
                 lambda_max: float = 8.0, epsilon: float = 0.04,
                 refine_bandwidth: bool = True, random_state: int | None = 0):
        self.pca_dim = pca_dim
        self.max_per_side = max_per_side
        self.bandwidth_multipliers = bandwidth_multipliers
        self.lambda_max = lambda_max
        self.epsilon = epsilon
        self.refine_bandwidth = refine_bandwidth
        self.random_state = random_state

    def _estimate(self, U: np.ndarray, P: np.ndarray) -> tuple[float, dict]:
        rng = np.random.default_rng(self.random_state)
        mix, comp = prepare_features(U, P, self.pca_dim, self.max_per_side, rng)
        est = estimate_prior(mix, comp, list(self.bandwidth_multipliers), self.lambda_max,
                             self.epsilon, refine_bandwidth=self.refine_bandwidth)
        return getattr(est, self.pick), est.to_dict()


@PRIOR_ESTIMATORS.register("km2", params=KernelMeanParams, params_key="km")
class KM2(_KernelMean):
    """KM2: kernel mean embedding, threshold from the slope of d(lambda) at 1."""

    pick = "km2"


@PRIOR_ESTIMATORS.register("km1", params=KernelMeanParams, params_key="km")
class KM1(_KernelMean):
    """KM1: kernel mean embedding, threshold 1 / (sqrt(min(n, m)) MMD)."""

    pick = "km1"
