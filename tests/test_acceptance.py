"""The issue's acceptance numbers on the real default params (slow: about 2 min a seed).

Run with `make test-all` or `pytest -m slow`."""

from __future__ import annotations

import pytest
import yaml

from tests.conftest import ROOT
from tests.helpers import dvc, read_metrics


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_default_pipeline_meets_the_targets(project, seed):
    params = yaml.safe_load((ROOT / "params.yaml").read_text())  # the shipped defaults
    params["base"]["seed"] = seed
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    dvc(project, "repro")
    metrics = read_metrics(project)
    assert metrics["accuracy"] >= 0.93
    if seed == 0:
        assert metrics["prior_abs_error"] <= 0.05


def _estimator_accuracy(project, params, clf) -> float:
    """`clf` fit on the pipeline's training rows (manifest order), scored on its test rows."""
    import pandas as pd
    import torch

    from pucl.data import load_dataset
    from pucl.params.config import Params

    p = Params.model_validate(params)
    manifest = pd.read_parquet(project / "data/split/manifest.parquet")
    train, test = manifest[manifest["split"] == "train"], manifest[manifest["split"] == "test"]
    data = load_dataset(p.data.dataset, root=str(project / p.paths.data_root),
                        test_fraction=p.data.test_fraction, seed=p.data.seed)
    torch.set_num_threads(p.base.threads)  # as the stages ran
    clf.set_params(random_state=p.base.seed, device="cpu")
    clf.fit(data.x_train[train["index"].to_numpy()], train["pu"].to_numpy())
    return clf.score(data.x_test[test["index"].to_numpy()], test["y"].to_numpy())


@pytest.mark.slow
def test_the_default_estimator_gives_the_default_runs_accuracy(project):
    """PUClassifier() shares every default with params.yaml: on the default run's split
    and seed it gives its accuracy (within 0.005; measured equal, 0.984)."""
    from pucl import PUClassifier

    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    dvc(project, "repro")
    accuracy = _estimator_accuracy(project, params, PUClassifier())
    assert accuracy == pytest.approx(read_metrics(project)["accuracy"], abs=0.005)


@pytest.mark.slow
def test_a_presets_estimator_gives_the_pipelines_accuracy_on_fashion_mnist(project):
    """PUClassifier.from_preset("fmnist-i") against the preset's recommended variant run
    through the stages, n_p = 1,000, seed 0 (about 20 minutes on 2 cores). It needs the
    Fashion-MNIST IDX files (Debian's dataset-fashion-mnist, or data/raw): without them
    it fails with the loader's one-line error, as a run would."""
    from pucl import PUClassifier
    from pucl.params.presets import load_preset
    from pucl.params.sweeps import variant_overrides
    from pucl.recipe.settings import apply_overrides

    _, overrides = variant_overrides(load_preset("fmnist-i"))
    params = apply_overrides(yaml.safe_load((ROOT / "params.yaml").read_text()),
                             {**overrides, "paths.data_root": str(ROOT / "data/raw")})
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    dvc(project, "repro")
    accuracy = _estimator_accuracy(project, params, PUClassifier.from_preset("fmnist-i"))
    assert accuracy == pytest.approx(read_metrics(project)["accuracy"], abs=0.002)
