"""Nearest point of a convex hull in an RKHS: the small QP inside KM1/KM2.

    minimise f(v) = (u - v)^T K (u - v)  over the simplex {v >= 0, sum v = 1}

solved by pairwise (SMO-style) coordinate descent: move mass from the support point with
the largest gradient to the point with the smallest, by the exact line-search step. Each
step costs O(n) (one kernel row pair), so warm starts across nearby u pay off.

Stopping rule with a proof: for convex f and any v in the simplex,
f(v) - f* <= grad f(v) . v - min_i grad_i f(v)  (the Frank-Wolfe duality gap),
so returning when that gap is below `tol` bounds the error of f by `tol`.

Pairwise steps crawl when K is numerically low-rank (smooth kernels on low-dimensional
data): many near-optimal solutions, tiny steps. There `nearest_in_hull_lowrank` solves
the same problem exactly as non-negative least squares on a factor K = L L^T
(Lawson-Hanson active set, whose support never exceeds rank + 1), with the equality
sum v = 1 as a heavily weighted extra row. Both report the same certified gap.

Warm start of the NNLS (`start`: the support at a nearby lambda, where KM2's bisection
asks next): solve on those columns alone, then add the columns whose gradient most wants
them in, a batch at a time, until none does (column generation: each round can only lower
the objective, and the columns only grow, so it ends, at the latest with all of them).
The optimal support holds a few dozen to a few hundred of the 1,000+ points, so most
solves read a small matrix. The answer is the full solve's; a whole KM2 estimate takes
1.2 to 2 times less (reports/benchmarks.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import nnls


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
        # Second-order working-set choice (as in LIBSVM): among support points with a
        # larger gradient, take the j whose exact line search decreases f the most.
        Ki = K[i]
        curv = np.maximum(diag[i] + diag - 2.0 * Ki, 1e-15)
        diff = g - g[i]
        gain = np.where((v > 0.0) & (diff > 0.0), diff * diff / curv, -1.0)
        j = int(np.argmax(gain))
        step = diff[j] / curv[j]
        step = min(step, v[j])
        v[i] += step
        v[j] -= step
        if v[j] < 1e-300:
            v[j] = 0.0
        Kv += step * (Ki - K[j])
    value = max(float(v @ Kv - 2.0 * (v @ Ku) + uKu), 0.0)
    return QPResult(v=v, value=value, gap=max(gap, 0.0), iterations=it)


def duality_gap(K_times: np.ndarray, Ku: np.ndarray, v: np.ndarray) -> float:
    """Frank-Wolfe gap of f at v, given K v (`K_times`) and K u."""
    g = K_times - Ku
    return max(2.0 * (float(g @ v) - float(g.min())), 0.0)


def nearest_in_hull_lowrank(L: np.ndarray, u: np.ndarray, max_iter: int | None = None,
                            start: np.ndarray | None = None) -> QPResult | None:
    """Same problem for K = L L^T (L: [n, r]), solved by NNLS; exact for that factor.
    `start`: indices of the points a nearby solution used (warm start; module docstring).
    Returns None when the active-set method needs more than `max_iter` steps."""
    n = L.shape[0]
    scale = max(float(np.sqrt((L * L).sum(axis=1)).max()), 1e-12)
    rho = 1e3 * scale  # weight of the row that enforces sum(v) = 1
    A = np.vstack([L.T, np.full((1, n), rho)])
    b = np.concatenate([L.T @ u, [rho]])
    try:
        v = (_nnls_from(A, b, start, max_iter) if start is not None and len(start)
             else nnls(A, b, maxiter=max_iter or 50 * n)[0])
    except RuntimeError:  # iteration cap reached
        return None
    v = v / v.sum()  # remove the tiny residual of the penalised equality
    Lv, Lu = L.T @ v, L.T @ u
    diff = Lu - Lv
    gap = duality_gap(L @ Lv, L @ Lu, v)
    return QPResult(v=v, value=float(diff @ diff), gap=gap, iterations=0)


def _nnls_from(A: np.ndarray, b: np.ndarray, start: np.ndarray, max_iter: int | None,
               rounds: int = 40) -> np.ndarray:
    """min ||A v - b|| over v >= 0 by NNLS on a few columns at a time, from `start`: each
    round adds the columns whose gradient most wants them in."""
    n = A.shape[1]
    columns = np.unique(np.asarray(start, dtype=np.int64))
    for _ in range(rounds):
        v = np.zeros(n)
        v[columns] = nnls(A[:, columns], b, maxiter=max_iter or 50 * len(columns))[0]
        gradient = A.T @ (A @ v - b)
        # the optimality condition of the whole problem; a column nnls had and left out
        # stays out this round (its gradient is zero up to nnls's own tolerance)
        wanted = np.setdiff1d(np.flatnonzero(gradient < 0), columns)
        if len(wanted) == 0:
            return v
        # the most wanted first, a batch at a time; no column leaves the set, so no set
        # comes back and the rounds end
        batch = max(16, int(np.count_nonzero(v)) // 4)
        columns = np.union1d(columns, wanted[np.argsort(gradient[wanted])[:batch]])
    return nnls(A, b, maxiter=max_iter or 50 * n)[0]  # the rounds did not settle: all at once
