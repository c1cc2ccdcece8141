"""Self-training on the classifier's own pseudo-labels (`classifier.self_train_epochs`).

After the PU fine-tuning, the trained classifier labels U by rank: the prior's share of U
with the highest scores is called positive, the rest negative (the rule PUPL's
`prior_rank` applies to clustering scores, here applied to a far better score). The
least certain rows on either side of that cut are left out, and the network is then
fine-tuned with cross-entropy on the labelled positives and the kept rows of U. The
cross-entropy sees every U row with a definite label and the augmented views of it,
which the PU risk, a difference of two expectations, does not (docs/classifiers.md).
"""

from __future__ import annotations

import numpy as np


def confident_pseudo_labels(scores: np.ndarray, prior: float, keep: float
                            ) -> tuple[np.ndarray, np.ndarray]:
    """Rows of `scores` (P(y = 1) per U row) to train on, and their labels {0, 1}.

    The round(prior * n) highest scores are positive, the others negative; of each side
    the `keep` share furthest from the cut is kept. Ties are broken by row order, so the
    result is a function of the scores alone."""
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 1 or len(scores) == 0:
        raise ValueError(f"scores must be a non-empty 1-d array, got shape {scores.shape}")
    if not 0.0 < prior < 1.0:
        raise ValueError(f"prior must be in (0, 1), got {prior}")
    if not 0.0 < keep <= 1.0:
        raise ValueError(f"keep must be in (0, 1], got {keep}")
    order = np.argsort(-scores, kind="stable")  # most positive first
    n_positive = int(round(prior * len(scores)))
    positive, negative = order[:n_positive], order[n_positive:][::-1]  # most certain first
    kept_p = positive[:int(round(keep * len(positive)))]
    kept_n = negative[:int(round(keep * len(negative)))]
    rows = np.concatenate([kept_p, kept_n])
    labels = np.concatenate([np.ones(len(kept_p), np.int64), np.zeros(len(kept_n), np.int64)])
    sort = np.argsort(rows, kind="stable")
    return rows[sort], labels[sort]
