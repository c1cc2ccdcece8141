"""Nearest point of a convex hull in an RKHS: the small QP inside KM1/KM2.

    minimise f(v) = (u - v)^T K (u - v)  over the simplex {v >= 0, sum v = 1}

solved by pairwise (SMO-style) coordinate descent: move mass from the support point with
the largest gradient to the point with the smallest, by the exact line-search step. Each
step costs O(n) (one kernel row pair), so warm starts across nearby u pay off.

Stopping rule with a proof: for convex f and any v in the simplex,
f(v) - f* <= grad f(v) . v - min_i grad_i f(v)  (the Frank-Wolfe duality gap),
so returning when that gap is below `tol` bounds the error of f by `tol`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class QPResult:
    v: np.ndarray
    value: float  # f(v), clipped at 0
    gap: float  # certified bound on f(v) - f*
    iterations: int


def nearest_in_hull(
    K: np.ndarray,
    Ku: np.ndarray,
    uKu: float,
    v0: np.ndarray | None = None,
    tol: float = 1e-9,
    max_iter: int = 200_000,
) -> QPResult:
    """K: [n, n] PSD kernel, Ku = K @ u, uKu = u^T K u; v0: warm start in the simplex."""
    n = K.shape[0]
    v = np.full(n, 1.0 / n) if v0 is None else np.array(v0, dtype=np.float64)
    Kv = K @ v
    diag = np.diag(K).copy()
    gap = np.inf
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007  (it is reported)
        g = Kv - Ku  # half the gradient of f
        i = int(np.argmin(g))
        gap = 2.0 * (float(g @ v) - float(g[i]))
        if gap <= tol:
            break
        j = int(np.argmax(np.where(v > 0.0, g, -np.inf)))
        curvature = diag[i] + diag[j] - 2.0 * K[i, j]
        step = (g[j] - g[i]) / curvature if curvature > 1e-15 else v[j]
        step = min(step, v[j])
        v[i] += step
        v[j] -= step
        if v[j] < 1e-300:
            v[j] = 0.0
        Kv += step * (K[i] - K[j])
    value = max(float(v @ Kv - 2.0 * (v @ Ku) + uKu), 0.0)
    return QPResult(v=v, value=value, gap=max(gap, 0.0), iterations=it)
