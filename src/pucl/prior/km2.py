"""Mixture-proportion estimation by kernel mean embedding: KM1 and KM2.

Ramaswamy, Scott and Tewari (ICML 2016), as specified step by step in docs/prior.md.
Mixture = unlabeled U (N points), component = labelled positives P (M points); the
estimate kappa is the fraction of P-distributed points inside U, i.e. the class prior.

d(lambda) is the RKHS distance from lambda * mean(U) + (1 - lambda) * mean(P) to the
convex hull of all N + M embedded points; it stays near 0 up to lambda* = 1 / (1 - kappa)
and grows after it. KM1/KM2 locate that kink by bisection on the slope of d.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import numpy as np
from scipy.spatial.distance import cdist
from sklearn.decomposition import PCA

from pucl.prior.qp import nearest_in_hull, nearest_in_hull_lowrank

NNLS_MAX_POINTS = 1500


@dataclass(frozen=True)
class PriorEstimate:
    km1: float
    km2: float
    sigma: float
    sigma_multiplier: float
    mmd: float
    threshold_km1: float
    threshold_km2: float
    n_mixture: int
    n_component: int
    qp_solves: int
    qp_solver: str
    seconds: float

    def to_dict(self) -> dict:
        return asdict(self)


def prepare_features(
    mixture: np.ndarray,
    component: np.ndarray,
    pca_dim: int,
    max_per_side: int,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Flatten, PCA fitted on both sides together, then subsample each side (seeded)."""
    mix = mixture.reshape(len(mixture), -1).astype(np.float64)
    comp = component.reshape(len(component), -1).astype(np.float64)
    both = np.concatenate([mix, comp])
    dim = min(pca_dim, both.shape[1], both.shape[0])
    reduced = PCA(n_components=dim, random_state=0).fit_transform(both)
    mix, comp = reduced[: len(mix)], reduced[len(mix):]
    if len(mix) > max_per_side:
        mix = mix[np.sort(rng.choice(len(mix), max_per_side, replace=False))]
    if len(comp) > max_per_side:
        comp = comp[np.sort(rng.choice(len(comp), max_per_side, replace=False))]
    return mix, comp


class DistanceCurve:
    """d(lambda) for one kernel matrix, memoised.

    solver "nnls": NNLS on an eigen-factor of K (exact; its cost grows with the optimal
    support, fine up to ~1,500 points). solver "pairwise": SMO steps warm-started from
    the solution at the nearest lambda solved so far (crawls near the kink when K is
    numerically low-rank, but scales to larger n). "auto" picks by size."""

    def __init__(self, K: np.ndarray, n_mixture: int, tol: float, solver: str = "auto"):
        if solver not in ("auto", "nnls", "pairwise"):
            raise ValueError(f"solver must be auto, nnls or pairwise, got {solver!r}")
        self.K = K
        self.N = n_mixture
        self.M = K.shape[0] - n_mixture
        self.tol = tol
        self._factor: np.ndarray | None = None
        self.use_nnls = solver == "nnls" or (solver == "auto" and K.shape[0] <= NNLS_MAX_POINTS)
        # K u_l is affine in lambda: K u_l = lambda a + (1 - lambda) b.
        self.a = K[:, : self.N].mean(axis=1)
        self.b = K[:, self.N:].mean(axis=1)
        self.aa = float(self.a[: self.N].mean())
        self.bb = float(self.b[self.N:].mean())
        self.ab = float(self.a[self.N:].mean())
        # At lambda = 1, u is the empirical mixture itself, a valid distribution: d = 0.
        u1 = np.concatenate([np.full(self.N, 1.0 / self.N), np.zeros(self.M)])
        self.solutions: dict[float, np.ndarray] = {1.0: u1}
        self.values: dict[float, float] = {1.0: 0.0}
        self.solver_calls = {"nnls": 0, "pairwise": 0}

    @property
    def factor(self) -> np.ndarray:
        if self._factor is None:
            eigval, eigvec = np.linalg.eigh(self.K)
            keep = eigval > 1e-12 * eigval[-1]
            self._factor = eigvec[:, keep] * np.sqrt(eigval[keep])
        return self._factor

    def __call__(self, lam: float) -> float:
        lam = round(float(lam), 12)
        if lam in self.values:
            return self.values[lam]
        Ku = lam * self.a + (1.0 - lam) * self.b
        uKu = lam * lam * self.aa + 2 * lam * (1 - lam) * self.ab + (1 - lam) ** 2 * self.bb
        result = None
        # both solvers start from the solution at the nearest lambda solved so far
        nearest = min(self.solutions, key=lambda known: abs(known - lam))
        warm = self.solutions[nearest]
        if self.use_nnls:
            u = np.concatenate([np.full(self.N, lam / self.N),
                                np.full(self.M, (1.0 - lam) / self.M)])
            # (lambda = 1's is u itself, not a solve: its support says nothing)
            start = np.flatnonzero(warm) if nearest != 1.0 else None
            result = nearest_in_hull_lowrank(self.factor, u, start=start)
            self.use_nnls = result is not None
            self.solver_calls["nnls"] += 1
        if result is None:
            result = nearest_in_hull(self.K, Ku, uKu, v0=warm, tol=self.tol * max(uKu, 1e-12))
            self.solver_calls["pairwise"] += 1
        self.solutions[lam] = result.v
        self.values[lam] = math.sqrt(result.value)
        return self.values[lam]


def _golden_max(f, lo: float, hi: float, iterations: int = 14) -> float:
    """Maximiser of a unimodal f on [lo, hi] by golden-section search."""
    ratio = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = lo, hi
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(iterations):
        if fc >= fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = f(d)
    return c if fc >= fd else d


def _bisect(curve: DistanceCurve, threshold: float, lambda_max: float, eps: float) -> float:
    left, right = 1.0, lambda_max
    while right - left > eps:
        mid = 0.5 * (left + right)
        slope = (curve(mid + eps / 2) - curve(mid)) * 2.0 / eps
        if slope > threshold:
            right = mid
        else:
            left = mid
    return 0.5 * (left + right)


def estimate_prior(
    mixture: np.ndarray,
    component: np.ndarray,
    bandwidth_multipliers: list[float],
    lambda_max: float = 8.0,
    epsilon: float = 0.04,
    refine_bandwidth: bool = True,
    tol: float = 1e-7,
    solver: str = "auto",
) -> PriorEstimate:
    """KM1 and KM2 estimates of the fraction of `component` inside `mixture` ([n, d] each)."""
    start = time.perf_counter()
    N, M = len(mixture), len(component)
    if N < 2 or M < 2:
        raise ValueError(f"need at least 2 points per side, got mixture {N}, component {M}")
    X = np.concatenate([mixture, component]).astype(np.float64)
    D = cdist(X, X, "sqeuclidean")
    sigma_med = math.sqrt(float(np.median(D[np.triu_indices(len(X), k=1)])))
    w = np.concatenate([np.full(N, 1.0 / N), np.full(M, -1.0 / M)])

    def mmd_at(mult: float) -> tuple[float, np.ndarray]:
        sigma = mult * sigma_med
        K = np.exp(-D / (2.0 * sigma * sigma))
        return math.sqrt(max(float(w @ K @ w), 0.0)), K

    grid = sorted(bandwidth_multipliers)
    scores = [mmd_at(m)[0] for m in grid]
    k = int(np.argmax(scores))
    mult = grid[k]
    if refine_bandwidth and len(grid) > 1:
        # The MMD peak falls between grid points, and KM2 moves with sigma: find the peak
        # by golden-section search on log(sigma) between the best point's neighbours.
        lo, hi = math.log(grid[max(k - 1, 0)]), math.log(grid[min(k + 1, len(grid) - 1)])
        mult = math.exp(_golden_max(lambda t: mmd_at(math.exp(t))[0], lo, hi))
    mmd, K = mmd_at(mult)
    sigma = mult * sigma_med

    curve = DistanceCurve(K, N, tol, solver)
    s0 = (curve(1.05) - curve(1.0)) / 0.05
    nu_km2 = (0.8 * s0 + 0.2 * mmd) / mmd
    nu_km1 = 1.0 / (math.sqrt(min(N, M)) * mmd)
    if nu_km1 > 0.9:
        nu_km1 = nu_km2
    lam_km2 = _bisect(curve, nu_km2 * mmd, lambda_max, epsilon)
    lam_km1 = _bisect(curve, nu_km1 * mmd, lambda_max, epsilon)
    return PriorEstimate(
        km1=(lam_km1 - 1.0) / lam_km1,
        km2=(lam_km2 - 1.0) / lam_km2,
        sigma=sigma,
        sigma_multiplier=mult,
        mmd=mmd,
        threshold_km1=nu_km1,
        threshold_km2=nu_km2,
        n_mixture=N,
        n_component=M,
        qp_solves=len(curve.values) - 1,
        qp_solver="nnls" if curve.solver_calls["pairwise"] == 0 else "pairwise",
        seconds=time.perf_counter() - start,
    )
