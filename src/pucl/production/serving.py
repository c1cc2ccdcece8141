"""Scoring with a trained classifier: find the model (`open_model`: a registered version,
a pipeline run's directory or name, an MLflow URI), read inputs, run the model over them
in batches, and write scores and labels.

Needs no project data: only the inputs and the model (a tracking store that holds it, or
the files of the run that trained it). The
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
from pucl.data.inputs import as_model_input
from pucl.data.own import IMAGE_SUFFIXES, image_files, read_images, read_npz
from pucl.errors import DataError
from pucl.tracking.models import ModelNotFound

THRESHOLD = 0.5
BATCH_ROWS = 512
OUTPUT_SUFFIXES = (".csv", ".parquet")


MODEL_FORMS = ("NAME", "NAME@ALIAS", "NAME/VERSION", "a run directory", "a run name",
               "a file of PUClassifier.save", "runs:/RUN_ID", "models:/...")


class RunClassifier:
    """The classifier in a finished run's files, scored as a pyfunc model is
    (`predict` on float32 numpy rows)."""

    def __init__(self, module: Any, in_shape: tuple[int, ...]):
        self.module, self.in_shape = module, in_shape

    def predict(self, x: np.ndarray) -> np.ndarray:
        import torch

        with torch.no_grad():
            return self.module(torch.as_tensor(x)).numpy()


class EstimatorClassifier:
    """A PUClassifier saved by `PUClassifier.save`, scored as a pyfunc model is: P(y = 1 |
    x) by the estimator's own predict_proba."""

    def __init__(self, path: Path):
        from pucl.estimators import PUClassifier

        self.estimator = PUClassifier.load(path)
        self.in_shape = tuple(self.estimator.model_.in_shape)

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.estimator.predict_proba(x)[:, 1]


def open_run(directory: Path) -> RunClassifier:
    """The classifier a pipeline run trained: a run directory of `pucl run` (with its
    params.yaml snapshot), or the project itself after `pucl repro`."""
    from pucl.artifacts.models import classifier_features, load_classifier, load_models
    from pucl.params.config import load_params
    from pucl.recipe import Recipe
    from pucl.recipe.served import served_classifier

    if not (directory / "params.yaml").is_file():
        raise ModelNotFound(f"--model {directory}: not a pipeline run (no params.yaml; "
                            "`pucl run` writes one in each run directory)")
    params = load_params(directory / "params.yaml")
    head = directory / params.paths.classifier / "head.pt"
    if not head.is_file():
        raise ModelNotFound(f"--model {directory}: the run has no trained classifier "
                            f"({head} is missing: did it finish?)")
    models = load_models(directory / params.paths.pretrain / "model.pt")
    in_shape = tuple(models[0].in_shape)
    module = served_classifier(Recipe.of(params), load_classifier(head, models),
                               classifier_features(head), images=len(in_shape) == 3)
    return RunClassifier(module, in_shape)


def open_model(reference: str, uri: str | None, runs: Path | None = None) -> tuple[Any, str]:
    """A model to score with and how to name it. `reference` is a run directory, an MLflow
    URI, a registered model (NAME, NAME@ALIAS, NAME/VERSION) or a pipeline run's name
    (its directory under `runs`, else its logged classifier in the store at `uri`)."""
    from pucl import tracking

    if reference.startswith(("runs:/", "models:/")):
        if uri is None:
            raise ModelNotFound(f"--model {reference}: give the store (--tracking-uri)")
        return tracking.load_uri(uri, reference), reference
    path = Path(reference).expanduser()
    if path.is_dir():
        return open_run(path.resolve()), f"run {path}"
    if path.is_file():
        return EstimatorClassifier(path), f"estimator {path}"
    client, registry_error, store_error = None, None, None
    if uri is not None:
        try:
            client = tracking.open_registry(uri)
            name, version = tracking.resolve_version(client, reference)
            return tracking.load_version(uri, name, version), f"{name} v{version}"
        except tracking.StoreUnavailable as exc:  # a run directory may still have the name
            store_error = exc
        except tracking.ModelNotFound as exc:
            registry_error = str(exc)
    if runs is not None and (runs / reference).is_dir():
        return open_run((runs / reference).resolve()), f"run {reference}"
    if store_error is not None:
        raise store_error
    if client is not None:
        logged = tracking.pipeline_run_models(client, reference)
        if logged:
            return tracking.load_uri(uri, logged[0]), f"run {reference} ({logged[0]})"
    where = f" (in {runs} or the store)" if runs is not None else " in the store"
    raise ModelNotFound(f"--model {reference!r}: {registry_error or 'no MLflow store given'}, "
                        f"and no pipeline run of that name{where}; give one of "
                        f"{', '.join(MODEL_FORMS)}")


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
        files = image_files(path)
        if not files:
            raise DataError(f"input folder {path} holds no image "
                            f"({', '.join(IMAGE_SUFFIXES)})")
        x = read_images(files)
        ids = [str(f.relative_to(path)) for f in files]
    else:
        arrays = read_npz(path)
        if "x" not in arrays:
            raise DataError(f"{path} has no array 'x' (has {sorted(arrays)})")
        x = arrays["x"]
        if len(x) == 0:
            raise DataError(f"{path}: x has 0 rows; nothing to score")
        x = as_model_input(x, f"{path}: x")
        ids = [str(i) for i in range(len(x))]
    return Inputs(ids, unit_scale(x).astype(np.float32))


def input_shape(model: Any) -> tuple[int, ...] | None:
    """The per-row shape the model takes: a run's own, or what an MLflow model's
    signature declares (None without one)."""
    if isinstance(model, RunClassifier | EstimatorClassifier):
        return model.in_shape
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
