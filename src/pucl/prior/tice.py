"""TIcE, Tree Induction for c Estimation (Bekker and Davis, "Estimating the Class Prior in
Positive and Unlabeled Data through Decision Tree Induction", AAAI 2018).

Pool the labelled positives P with the unlabeled rows U. In the pool, a positive carries
a label with probability c = n_p / (n_p + prior * n_u), the label frequency. In any subset
S of the pool, the share of labelled rows L_S / |S| is c times the share of positives in
S: at most c, and equal to c where S holds no negatives. TIcE searches such subsets among
the nodes of a decision tree grown to tell labelled rows from unlabeled ones.

1. Both sides are projected on `pca_dim` principal components fitted on all their rows
   and subsampled to at most `max_per_side` rows each (KM2's `prepare_features`); the
   rows are dealt into `folds` folds.
2. For each fold k, a tree (scikit-learn's CART, entropy on the label, leaves of at least
   `min_leaf` rows, at most `max_leaves` leaves) is grown on the other folds. Its nodes,
   the root included, are the candidate subsets; L_S and |S| are counted on fold k, rows
   the tree never saw, so a node's share is not inflated by its own fit. Nodes with fewer
   than `min_leaf` rows of fold k are left out.
3. A node's share is lowered by a one-sided bound, so that a node whose share is high by
   chance does not win. In a subset free of negatives each row is labelled with
   probability c, so its share has variance c (1 - c) / |S|, and by Cantelli's
   inequality c >= L_S / |S| - sqrt(c (1 - c) (1 - delta) / (delta |S|)) with
   probability at least 1 - delta. c is unknown: the first pass puts in 1/2 (the largest
   variance), each of the `passes` after it the previous pass's estimate.
4. Fold k's c is the largest bound over its candidates, and its prior n_p (1 - c) /
   (c n_u) with fold k's counts (clipped to [0, 1]); the estimate is the mean over folds.

Two errors pull against each other. The bound lowers every share, so the prior errs
high; the largest of many noisy shares is high by chance, so it errs low, the more so
the more nodes compete. On separable 2-d data 16 leaves of 50 rows keep both within 0.04;
64 of 25 err low by up to 0.12 there. On images, few leaves cannot reach a
region free of negatives: on the embedded MNIST cases (reports/prior) 16 leaves of at
least 50 rows erred by 0.20-0.23 and 64 leaves of at least 25 rows (the defaults) by
0.04-0.06, with delta = 0.2; these were chosen on those cases, not on Fashion-MNIST.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field
from sklearn.tree import DecisionTreeClassifier

from pucl.prior.base import PRIOR_ESTIMATORS, PriorEstimator
from pucl.prior.km2 import prepare_features
from pucl.registry import EntryParams


class TIcEParams(EntryParams):
    """The tree that proposes subsets, and the bound's confidence."""

    folds: int = Field(2, ge=2, le=10, description="the tree grows on the other folds; "
                       "its nodes are counted on this one")
    pca_dim: int = Field(50, ge=1, description="principal components the tree splits on")
    max_per_side: int = Field(4000, ge=10, description="rows of P and of U kept (seeded)")
    max_leaves: int = Field(64, ge=2, description="leaves of each tree at most")
    min_leaf: int = Field(25, ge=1, description="rows of a leaf at least, and of a "
                          "candidate node on the fold that counts it")
    delta: float = Field(0.2, gt=0.0, lt=1.0, description="the bound holds with "
                         "probability 1 - delta per node")
    passes: int = Field(2, ge=1, description="the bound's variance is c (1 - c) / |S|, "
                        "c = 1/2 on the first pass, then the previous pass's estimate")


def lower_bounds(labelled: np.ndarray, size: np.ndarray, delta: float,
                 c: float = 0.5) -> np.ndarray:
    """Per node, the share of labelled rows minus Cantelli's slack for a proportion whose
    rows are labelled with probability c (c = 1/2: the largest variance there is)."""
    size = np.maximum(size, 1)
    return labelled / size - np.sqrt(c * (1.0 - c) * (1.0 - delta) / (delta * size))


def candidate_bounds(labelled: np.ndarray, size: np.ndarray, delta: float, c: float,
                     min_size: int) -> np.ndarray:
    """lower_bounds, with -inf for nodes of fewer than min_size rows (the root stays)."""
    bounds = lower_bounds(labelled, size, delta, c)
    small = size < min_size
    small[0] = False
    return np.where(small, -np.inf, bounds)


def prior_from_label_frequency(c: float, n_p: int, n_u: int) -> float:
    """The prior of U implied by label frequency c in the pool of n_p labelled and n_u
    unlabeled rows: c = n_p / (n_p + prior * n_u), solved for the prior, within [0, 1]."""
    if c <= 0:
        return 1.0
    return float(min(max(n_p * (1.0 - c) / (c * n_u), 0.0), 1.0))


def node_counts(tree: DecisionTreeClassifier, X: np.ndarray, s: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """Rows of X in each node of `tree` (|S|), and labelled rows among them (L_S)."""
    path = tree.decision_path(X)  # sparse [rows, nodes]: 1 where the row passes the node
    size = np.asarray(path.sum(axis=0)).ravel()
    labelled = np.asarray(path[s == 1].sum(axis=0)).ravel()
    return labelled, size


@PRIOR_ESTIMATORS.register("tice", params=TIcEParams, params_key="tice")
class TIcE(PriorEstimator):
    """TIcE (Bekker and Davis, AAAI 2018): the purest node of a P-vs-U tree, bounded."""

    def __init__(self, folds: int = 2, pca_dim: int = 50, max_per_side: int = 4000,
                 max_leaves: int = 64, min_leaf: int = 25, delta: float = 0.2,
                 passes: int = 2, random_state: int | None = 0):
        self.folds, self.pca_dim, self.max_per_side = folds, pca_dim, max_per_side
        self.max_leaves, self.min_leaf, self.delta = max_leaves, min_leaf, delta
        self.passes, self.random_state = passes, random_state

    @property
    def min_samples(self) -> int:  # per side: a leaf's worth of rows in every fold
        return self.folds * self.min_leaf

    def size_hint(self) -> str:
        return (f" ({self.min_leaf} per fold of its {self.folds} folds, prior.tice.min_leaf"
                " and prior.tice.folds)")

    def _estimate(self, U: np.ndarray, P: np.ndarray) -> tuple[float, dict]:
        rng = np.random.default_rng(self.random_state)
        U, P = prepare_features(U, P, self.pca_dim, self.max_per_side, rng)  # as KM2's
        pool = np.concatenate([P, U])
        s = np.r_[np.ones(len(P), dtype=np.int64), np.zeros(len(U), dtype=np.int64)]
        fold = np.empty(len(pool), dtype=np.int64)
        for side in (s == 1, s == 0):  # each side dealt evenly over the folds
            rows = np.flatnonzero(side)
            fold[rows[rng.permutation(len(rows))]] = np.arange(len(rows)) % self.folds
        counts = []  # per fold: (L_S, |S|) of every node, n_p and n_u of the fold
        for k in range(self.folds):
            grow, count = fold != k, fold == k
            tree = DecisionTreeClassifier(
                criterion="entropy", max_leaf_nodes=self.max_leaves,
                min_samples_leaf=self.min_leaf,
                random_state=int(rng.integers(2**31))).fit(pool[grow], s[grow])
            counts.append((*node_counts(tree, pool[count], s[count]),
                           int(s[count].sum()), int((s[count] == 0).sum())))
        # The slack needs c's variance: the first pass takes the largest (c = 1/2), the
        # next ones the previous pass's mean estimate of c.
        c_variance = 0.5
        for _ in range(self.passes):
            bounds = [candidate_bounds(labelled, size, self.delta, c_variance, self.min_leaf)
                      for labelled, size, _, _ in counts]
            best = [int(np.argmax(b)) for b in bounds]
            label_frequencies = [float(b[i]) for b, i in zip(bounds, best, strict=True)]
            c_variance = min(max(float(np.mean(label_frequencies)), 1e-3), 0.5)
        estimates = [prior_from_label_frequency(c, n_p, n_u)
                     for c, (_, _, n_p, n_u) in zip(label_frequencies, counts, strict=True)]
        node_sizes = [int(size[b]) for (_, size, _, _), b in zip(counts, best, strict=True)]
        return float(np.mean(estimates)), {
            "tice_fold_estimates": [round(e, 6) for e in estimates],
            "tice_label_frequencies": [round(c, 6) for c in label_frequencies],
            "tice_node_sizes": node_sizes, "tice_n_u": len(U), "tice_n_p": len(P)}

