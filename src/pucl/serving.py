"""Scoring with a registered classifier: read inputs, run the model (an MLflow pyfunc,
loaded by `pucl.tracking.registry`) over them in batches, and write scores and labels.

Needs no project data: only the inputs and a tracking store that holds the model. The
label rule is one threshold on the score (`THRESHOLD`): the classifier is trained to
output the posterior P(y = 1 | x) (docs/production.md), so 0.5 is the Bayes rule for
accuracy; `--threshold` moves it for another trade-off of precision and recall.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pucl.data.augment import unit_scale
from pucl.data.own import IMAGE_SUFFIXES, _as_images_or_features, _image_files, _read_images
from pucl.data.tracked import read_npz
from pucl.errors import DataError

THRESHOLD = 0.5
BATCH_ROWS = 512
OUTPUT_SUFFIXES = (".csv", ".parquet")


@dataclass(frozen=True)
class Inputs:
    ids: list[str]  # row numbers of an npz, file names of a folder
    x: np.ndarray  # float32 model input: pixels in [0, 1] [n, c, h, w] or features [n, d]


def read_inputs(path: Path) -> Inputs:
    """Rows to score: an npz with `x` (as for training data) or a folder of images (every
    image under it, in name order)."""
    if not path.exists():
        raise DataError(f"input {path} does not exist (give an .npz with x, or an image folder)")
    if path.is_dir():
        files = _image_files(path)
        if not files:
            raise DataError(f"input folder {path} holds no image "
                            f"({', '.join(IMAGE_SUFFIXES)})")
        x = _read_images(files)
        ids = [str(f.relative_to(path)) for f in files]
    else:
        arrays = read_npz(path)
        if "x" not in arrays:
            raise DataError(f"{path} has no array 'x' (has {sorted(arrays)})")
        x = arrays["x"]
        if len(x) == 0:
            raise DataError(f"{path}: x has 0 rows; nothing to score")
        x = _as_images_or_features(x, f"{path}: x")
        ids = [str(i) for i in range(len(x))]
    return Inputs(ids, unit_scale(x).astype(np.float32))


def input_shape(model: Any) -> tuple[int, ...] | None:
    """The per-row shape the model's signature declares (None without one)."""
    schema = model.metadata.get_input_schema()
    if schema is None or not schema.inputs:
        return None
    return tuple(schema.inputs[0].shape[1:])


def score(model: Any, x: np.ndarray, progress: bool = False, what: str = "scoring"
          ) -> np.ndarray:
    """P(y = 1 | x) for every row, in batches (a progress bar when asked)."""
    from tqdm.auto import tqdm

    expected = input_shape(model)
    if expected is not None and tuple(x.shape[1:]) != expected:
        raise DataError(f"inputs are {list(x.shape[1:])} per row; the model takes "
                        f"{list(expected)}")
    out = np.empty(len(x), dtype=np.float64)
    bar = tqdm(total=len(x), desc=what, unit="row", disable=not progress)
    for start in range(0, len(x), BATCH_ROWS):
        chunk = x[start:start + BATCH_ROWS]
        out[start:start + len(chunk)] = np.asarray(model.predict(chunk)).reshape(-1)
        bar.update(len(chunk))
    bar.close()
    return out


def labels(scores: np.ndarray, threshold: float = THRESHOLD) -> np.ndarray:
    return (scores >= threshold).astype(np.int8)


def check_output(path: Path) -> None:
    if path.suffix.lower() not in OUTPUT_SUFFIXES:
        raise DataError(f"--out {path}: unknown format {path.suffix or '(none)'!r} "
                        f"(allowed: {', '.join(OUTPUT_SUFFIXES)})")
    if not path.parent.exists():
        raise DataError(f"--out {path}: directory {path.parent} does not exist")


def write_scores(path: Path, inputs: Inputs, scores: np.ndarray, threshold: float) -> None:
    """One row per input: id, score = P(y = 1 | x), label = score >= threshold."""
    import pandas as pd

    from pucl.io import write_table

    write_table(path, pd.DataFrame({"id": inputs.ids, "score": scores,
                                    "label": labels(scores, threshold)}))
