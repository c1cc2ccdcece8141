"""The PUPL algorithms on feature arrays (paper 000, Algorithm 2, eq. 45-50).

`pu_kmeans` is the paper's method: 2-means whose positive centroid starts at the mean
of the labelled positives (eq. 47), whose negative centroid is drawn from the unlabeled
points with probability proportional to D^2 (eq. 48-49), and whose labelled positives
stay positive through every Lloyd iteration; seeded restarts keep the lowest potential
(eq. 45). Nearest-centroid search runs on faiss.

`prior_rank` is the prior-aware alternative (docs/pupl.md): the pi_hat fraction of U
closest (cosine) to the labelled-positive centroid is labelled positive. The registered
labellers (kmeans.py, prior_rank.py, auto.py) wrap these as scikit-learn estimators.
"""

from __future__ import annotations

from dataclasses import dataclass

import faiss
import numpy as np

_CHUNK = 65_536  # rows per partial sum: bounded float32 rounding, cache-sized blocks


@dataclass(frozen=True)
class PseudoLabels:
    labels: np.ndarray  # int64 [n], 1 = positive
    margin: np.ndarray  # float32 [n], > 0 leans positive; larger = more confident
    potential: float  # k-means potential of the returned labelling (eq. 45)
    method: str
    iterations: int  # Lloyd iterations of the kept restart
    best_restart: int

    @property
    def positive_fraction(self) -> float:
        return float(self.labels.mean())


def _nearest(z: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """Squared distances [n, 2] to both centroids (faiss flat L2 search, k = 2)."""
    index = faiss.IndexFlatL2(z.shape[1])
    index.add(np.ascontiguousarray(centroids, dtype=np.float32))
    dist, ids = index.search(z, 2)
    out = np.empty_like(dist)
    np.put_along_axis(out, ids, dist, axis=1)
    return out  # column 0: positive centroid, column 1: negative centroid


def _row_norms(z: np.ndarray) -> np.ndarray:
    out = np.empty(len(z), dtype=np.float64)
    for part in _chunks(len(z)):
        out[part] = np.einsum("ij,ij->i", z[part], z[part], dtype=np.float64)
    return out


def _chunks(n: int):
    return (slice(start, start + _CHUNK) for start in range(0, n, _CHUNK))


def _closer_to_positive(z: np.ndarray, mu_p: np.ndarray, mu_n: np.ndarray) -> np.ndarray:
    """||z - mu_p||^2 <= ||z - mu_n||^2, as the half-space test it is for two
    centroids: z . (mu_p - mu_n) >= (|mu_p|^2 - |mu_n|^2) / 2. One matrix-vector
    product per chunk; at 1M x 128 it is 6x faster than a k = 2 search."""
    w = (mu_p - mu_n).astype(np.float32)
    bias = 0.5 * (float(mu_p @ mu_p) - float(mu_n @ mu_n))
    out = np.empty(len(z), dtype=bool)
    for part in _chunks(len(z)):
        out[part] = z[part] @ w >= bias
    return out


def _centroids(z: np.ndarray, positive: np.ndarray, total: np.ndarray,
               mu_n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both cluster means from one pass: the positive sum is a matrix-vector product
    with the 0/1 mask (no copy of the members), the negative sum the total minus it."""
    n_pos = int(positive.sum())
    sum_p = np.zeros(z.shape[1], dtype=np.float64)
    for part in _chunks(len(z)):  # float64 accumulation across chunks
        sum_p += positive[part].astype(np.float32) @ z[part]
    n_neg = len(z) - n_pos
    new_n = ((total - sum_p) / n_neg).astype(np.float32) if n_neg else mu_n
    return (sum_p / n_pos).astype(np.float32), new_n


def _potential(dist: np.ndarray, positive: np.ndarray) -> float:
    return float(np.where(positive, dist[:, 0], dist[:, 1]).sum(dtype=np.float64))


def pu_kmeans(
    z: np.ndarray,
    labeled: np.ndarray,
    restarts: int,
    max_iter: int,
    rng: np.random.Generator,
    mean_start: bool = True,
) -> PseudoLabels:
    """z: float [n, d] features of every training row; labeled: bool [n].

    `mean_start`: one more run, its negative centroid started at the unlabeled rows'
    mean (the authors' released code starts there, and only there); the lowest potential
    over all runs still wins, so it can only lower the potential. Its `best_restart` is
    `restarts`. The D^2 draws are the same with it or without.

    The Lloyd iterations assign by the exact two-centroid half-space test in chunks;
    each restart's final labelling, potential and margins come from a faiss search."""
    z = np.ascontiguousarray(z, dtype=np.float32)
    labeled = np.asarray(labeled, dtype=bool)
    if not labeled.any():
        raise ValueError("PUPL needs at least one labelled positive")
    unlabeled = np.flatnonzero(~labeled)
    if len(unlabeled) == 0:
        raise ValueError("PUPL needs at least one unlabeled point")
    total = z.sum(axis=0, dtype=np.float64)
    mu_p0 = (labeled.astype(np.float32) @ z / labeled.sum()).astype(np.float32)
    # D^2 seeding (eq. 48-49): |z|^2 - 2 z.mu + |mu|^2 without an [n, d] temporary
    d2 = (_row_norms(z) - 2.0 * (z @ mu_p0) + float(mu_p0 @ mu_p0))[unlabeled]
    d2 = np.maximum(d2, 0.0)
    seed_prob = d2 / d2.sum() if d2.sum() > 0 else None

    starts = [z[unlabeled[rng.choice(len(unlabeled), p=seed_prob)]].copy()
              for _ in range(restarts)]
    if mean_start:
        starts.append(z[unlabeled].mean(axis=0, dtype=np.float64).astype(np.float32))
    best: tuple[float, np.ndarray, np.ndarray, int, int] | None = None
    for restart, mu_n in enumerate(starts):
        mu_p = mu_p0.copy()
        positive = None
        for it in range(1, max_iter + 1):  # noqa: B007  (it is reported)
            new = _closer_to_positive(z, mu_p, mu_n) | labeled
            if positive is not None and np.array_equal(new, positive):
                break
            positive = new
            mu_p, mu_n = _centroids(z, positive, total, mu_n)
        dist = _nearest(z, np.stack([mu_p, mu_n]))
        positive = (dist[:, 0] <= dist[:, 1]) | labeled
        pot = _potential(dist, positive)
        if best is None or pot < best[0]:
            best = (pot, positive, dist, it, restart)
    pot, positive, dist, it, restart = best  # type: ignore[misc]
    margin = (dist[:, 1] - dist[:, 0]).astype(np.float32)
    margin[labeled] = np.inf
    return PseudoLabels(positive.astype(np.int64), margin, pot, "pu_kmeans", it, restart)


def prior_rank(
    z: np.ndarray,
    labeled: np.ndarray,
    in_u: np.ndarray,
    prior: float,
) -> PseudoLabels:
    """Label positive the round(prior * |U|) members of U most similar to the labelled
    centroid (labelled rows of U count towards that number)."""
    z = np.ascontiguousarray(z, dtype=np.float32)
    labeled = np.asarray(labeled, dtype=bool)
    in_u = np.asarray(in_u, dtype=bool)
    if not 0.0 < prior < 1.0:
        raise ValueError(f"prior must be in (0, 1), got {prior}")
    mu_p = z[labeled].mean(axis=0)
    zn = z / np.maximum(np.linalg.norm(z, axis=1, keepdims=True), 1e-12)
    score = zn @ (mu_p / max(np.linalg.norm(mu_p), 1e-12))
    candidates = np.flatnonzero(in_u & ~labeled)
    wanted = int(round(prior * in_u.sum())) - int((in_u & labeled).sum())
    wanted = int(np.clip(wanted, 0, len(candidates)))
    positive = labeled.copy()
    positive[candidates[np.argsort(-score[candidates], kind="stable")[:wanted]]] = True
    cut = np.sort(score[candidates])[::-1][wanted - 1] if wanted > 0 else np.inf
    margin = (score - cut).astype(np.float32)
    margin[labeled] = np.inf
    mu_n = z[~positive].mean(axis=0) if (~positive).any() else mu_p
    dist = _nearest(z, np.stack([z[positive].mean(axis=0), mu_n]))
    return PseudoLabels(positive.astype(np.int64), margin, _potential(dist, positive),
                        "prior_rank", 0, 0)
