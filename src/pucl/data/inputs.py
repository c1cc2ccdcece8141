"""What a model takes, in one place: the npz loader (`data.dataset: npz`), the tracked
dataset's batches, `pucl predict` and `PUClassifier` all accept exactly these inputs.

- images: uint8 pixels, or floats in [0, 1], as [n, height, width] (one channel) or
  [n, channels, height, width] (channels first, as torch has them);
- feature rows: finite numbers [n, d].

Channels-last images [n, height, width, channels] are refused with the one-line fix: a
guess could transpose a small image the wrong way without a word.
"""

from __future__ import annotations

import numpy as np

from pucl.errors import DataError

CHANNELS = (1, 3, 4)  # grey, RGB, RGBA: what a channels axis holds
ACCEPTED = ("images: uint8, or floats in [0, 1], [n, h, w] or [n, c, h, w]; "
            "features: numbers [n, d]")


def as_model_input(x: np.ndarray, what: str) -> np.ndarray:
    """`x` as the models take it: images as [n, c, h, w] (uint8 kept, floats as float32),
    feature rows as float32 [n, d]; else one line naming what `x` is and what is allowed."""
    x = np.asarray(x)
    floating = np.issubdtype(x.dtype, np.floating)
    if x.ndim in (3, 4) and (x.dtype == np.uint8 or floating):
        images = x[:, None] if x.ndim == 3 else x
        if images.shape[-1] in CHANNELS and images.shape[1] not in CHANNELS:
            raise DataError(f"{what}: images {list(x.shape)} look channels-last [n, height, "
                            "width, channels]; give [n, channels, height, width] "
                            "(np.moveaxis(x, -1, 1))")
        if floating:
            images = images.astype(np.float32)
            low, high = (float(images.min()), float(images.max())) if images.size else (0, 0)
            if not (np.isfinite(low) and np.isfinite(high) and low >= 0.0 and high <= 1.0):
                raise DataError(f"{what}: float images must hold pixels in [0, 1], found "
                                f"values in [{low:g}, {high:g}] (divide by 255, or give "
                                "uint8 pixels)")
        return images
    if x.ndim == 2 and np.issubdtype(x.dtype, np.number):
        x = x.astype(np.float32)
        if not np.isfinite(x).all():
            raise DataError(f"{what}: features hold NaN or infinite values")
        return x
    hint = " (pixels in 0..255: x.astype(np.uint8))" if x.ndim in (3, 4) and np.issubdtype(
        x.dtype, np.integer) else ""
    raise DataError(f"{what}: got {x.dtype} {list(x.shape)}; allowed: {ACCEPTED}{hint}")


def as_stored_pixels(x: np.ndarray) -> np.ndarray:
    """Images kept as 8-bit pixels (a quarter of float32's memory): floats in [0, 1] are
    rounded to the nearest 1/255, exact for pixels that were uint8 to begin with. Feature
    rows pass unchanged."""
    if x.ndim == 4 and x.dtype != np.uint8:
        return np.rint(x * 255.0).astype(np.uint8)
    return x
