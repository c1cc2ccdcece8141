"""The data contracts at stage boundaries stop a real stage: one line naming the
expectation, exit code 2, no output written, the MLflow run FAILED with the report."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import torch
import yaml
from mlflow.tracking import MlflowClient

from tests.conftest import copy_project
from tests.helpers import stage


def _failed_run(uri: str, name: str):
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("pucl")
    runs = client.search_runs([exp.experiment_id], f"attributes.run_name = '{name}'",
                              order_by=["attributes.start_time DESC"])
    return client, runs[0]


def test_suites_stop_stages_on_corrupted_artefacts(finished_tiny, tmp_path, tracking_uri,
                                                   monkeypatch):
    # the session's finished project as it was after pretraining
    project = copy_project(finished_tiny, tmp_path / "proj",
                           drop=("pupl", "classifier", "evaluate"))
    monkeypatch.setenv("PUCL_ROOT", str(project))
    validation = json.loads((project / "data/split/validation.json").read_text())
    assert validation["raw_data"]["success"] and validation["pu_split"]["success"]

    # NaN weights in the encoder: every feature PUPL would cluster is NaN.
    model_path = project / "data/pretrain/model.pt"
    saved = torch.load(model_path, weights_only=True)
    good = {k: v.clone() for k, v in saved["state_dict"].items()}
    first = next(k for k in good if k.endswith("weight"))
    saved["state_dict"][first] = torch.full_like(good[first], float("nan"))
    torch.save(saved, model_path)
    result = stage(project, "pupl_label", check=False)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr
    assert lines[0].startswith("pucl pupl_label: error: validation suite 'features' failed: "
                               "expect_column_values_to_be_between(dimensions.non_finite)")
    assert not (project / "data/pupl/labels.parquet").exists()
    client, run = _failed_run(tracking_uri, "pupl_label")
    assert run.info.status == "FAILED"
    local = client.download_artifacts(run.info.run_id, "validation/features.json",
                                      str(project))
    report = json.loads(Path(local).read_text())
    assert report["success"] is False and report["failed"] >= 1

    # Healthy features but an impossible band for the positive fraction.
    saved["state_dict"] = good
    torch.save(saved, model_path)
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["validation"]["positive_fraction"] = [0.96, 1.0]
    (project / "params.yaml").write_text(yaml.safe_dump(params))
    result = stage(project, "pupl_label", check=False)
    assert result.returncode == 2
    assert "validation suite 'pseudo_labels' failed: expect_column_mean_to_be_between" \
           "(labels.pseudo_label) [positive fraction in the sane band]: observed 0." \
           in result.stderr
    assert not (project / "data/pupl/labels.parquet").exists()

    params["validation"]["positive_fraction"] = [0.05, 0.95]
    (project / "params.yaml").write_text(yaml.safe_dump(params))
    stage(project, "pupl_label")
    labels = pd.read_parquet(project / "data/pupl/labels.parquet")
    assert set(labels["pseudo_label"]) == {0, 1}
    assert json.loads((project / "data/pupl/validation.json").read_text()) == {
        "features": {"success": True, "evaluated": 3, "failed": 0},
        "pseudo_labels": {"success": True, "evaluated": 6, "failed": 0}}
