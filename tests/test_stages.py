"""Every stage, run for real on tiny params, writes exactly its declared outputs and
records itself in MLflow."""

from __future__ import annotations

import math

from mlflow.tracking import MlflowClient

from tests.helpers import STAGES, data_files, declared_outputs, read_metrics, stage


def test_each_stage_writes_exactly_its_declared_outs_and_is_tracked(project, tracking_uri):
    declared = declared_outputs(project)
    assert set(declared) == set(STAGES)
    before = data_files(project)  # the tracked dataset's README
    # written beside the outputs, declared to nobody: the clock times of pretraining
    untracked = {"pretrain": {"data/pretrain/timing.csv"}}
    for name in STAGES:
        stage(project, name)
        after = data_files(project)
        assert after - before == declared[name] | untracked.get(name, set()), name
        before = after

    metrics = read_metrics(project)
    for key in ("accuracy", "f1", "precision", "recall", "roc_auc", "prior_estimate",
                "prior_true", "prior_abs_error", "pseudo_label_accuracy", "knn_accuracy",
                "knn_accuracy_inputs"):
        assert key in metrics and math.isfinite(metrics[key]), key
        if key != "prior_abs_error":
            assert 0.0 <= metrics[key] <= 1.0, key
    assert metrics["prior_abs_error"] == abs(metrics["prior_estimate"] - metrics["prior_true"])
    # the estimate of estimate_prior is what every later stage uses; prior.json holds no
    # clock time (every later stage depends on it: DVC must see a rerun as unchanged)
    import json

    first = json.loads((project / "data/prior/prior.json").read_text())
    assert first["prior"] == metrics["prior_estimate"] and "seconds" not in first
    # unit-norm projections: class prototype and sample prototype are at most 2 apart
    assert 0.0 < metrics["prototype_bias"] < 2.0

    # Query the store back: one finished run per stage, with params, metrics and tags.
    client = MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name("pucl")
    runs = client.search_runs([experiment.experiment_id])
    by_stage = {r.data.tags["stage"]: r for r in runs}
    assert set(by_stage) == set(STAGES)
    assert all(r.info.status == "FINISHED" for r in runs)
    assert by_stage["pretrain"].data.params["pretrain.temperature"] == "0.5"
    assert by_stage["build_split"].data.params["split.n_p"] == "200"
    assert by_stage["evaluate"].data.metrics["accuracy"] == metrics["accuracy"]
    assert all(len(r.data.tags["git_commit"]) == 40 for r in runs)
    history = client.get_metric_history(by_stage["pretrain"].info.run_id, "loss")
    assert [m.step for m in history] == [1, 2]
    artifacts = {a.path for a in client.list_artifacts(by_stage["evaluate"].info.run_id)}
    assert {"metrics.json", "roc.csv", "embedding.png", "roc.png", "errors_by_class.csv",
            "errors_by_class.png"} <= artifacts
    # mnist-i: the ten digits, evens positive; their mistakes add up to the accuracy's
    import pandas as pd

    by_class = pd.read_csv(project / "data/evaluate/errors_by_class.csv")
    assert by_class["class"].tolist() == list(range(10))
    assert by_class["name"].astype(str).tolist() == [str(d) for d in range(10)]  # unnamed
    assert by_class["label"].tolist() == [1, 0] * 5
    assert by_class["rows"].sum() == metrics["n_test"]
    assert by_class["errors"].sum() == round((1 - metrics["accuracy"]) * metrics["n_test"])

    # the validation part: 10% of P and of the other rows, which no training step saw. U is
    # a draw of 1,000 training rows (TINY_PARAMS' split.max_unlabeled), the labelled
    # positives among them at the same chance as any row (case_control)
    manifest = pd.read_parquet(project / "data/split/manifest.parquet")
    val, train = manifest[manifest["split"] == "val"], manifest[manifest["split"] == "train"]
    others = manifest[(manifest["split"] != "test") & (manifest["pu"] == 0)]
    assert manifest["in_u"].sum() == 1000 and others["in_u"].all()
    assert (val["pu"].sum(), len(val) - 20) == (20, round(0.1 * len(others)))  # n_p 200
    assert metrics["val_n_p"] == 20 and metrics["val_n_u"] == val["in_u"].sum()
    pseudo = pd.read_parquet(project / "data/pupl/labels.parquet")
    assert set(pseudo["index"]) == set(train["index"])
    assert metrics["val_prior"] == metrics["prior_estimate"]  # the pipeline's, not the truth
    for name in ("accuracy", "auc", "f1"):
        assert metrics[f"val_est_{name}_low"] <= metrics[f"val_est_{name}"] \
            <= metrics[f"val_est_{name}_high"]
    # the same classifier on two samples of one distribution: about 100 validation rows
    # against the test set (the tiny run's accuracy itself varies between machines)
    assert abs(metrics["val_true_accuracy"] - metrics["accuracy"]) < 0.1  # 0.04 here
    assert by_stage["evaluate"].data.metrics["val_est_accuracy"] == metrics["val_est_accuracy"]


def test_unreachable_tracking_store_still_writes_outputs(project):
    # a path below a regular file can never be opened, not even by root
    broken = f"sqlite:///{project / 'params.yaml' / 'mlflow.db'}"
    result = stage(project, "build_split", env={"MLFLOW_TRACKING_URI": broken})
    assert "results are written locally only" in result.stderr
    assert (project / "data/split/manifest.parquet").exists()


def test_missing_input_is_one_line_and_exit_2(project):
    result = stage(project, "estimate_prior", check=False)
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("pucl estimate_prior: error: missing input")
    assert "Traceback" not in result.stderr


def test_prior_aware_loss_uses_the_prior_it_is_given(project, tracking_uri):
    import json

    import yaml

    params = yaml.safe_load((project / "params.yaml").read_text())
    params["pretrain"].update({"loss": "punce", "prior": "oracle", "epochs": 1})
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    for name in ("build_split", "estimate_prior", "pretrain"):
        stage(project, name)
    report = json.loads((project / "data/prior/prior.json").read_text())
    client = MlflowClient(tracking_uri)
    runs = client.search_runs([client.get_experiment_by_name("pucl").experiment_id],
                              "tags.stage = 'pretrain'")
    assert runs[0].data.metrics["loss_prior"] == report["prior_true"]
    assert runs[0].data.tags["loss_prior_source"] == "oracle"


def test_a_degenerate_pseudo_labelling_is_reported_not_silent(project, tracking_uri):
    """The paper's pu_kmeans keeps its split, but a split far from the prior is flagged in
    the summary, on stderr, and in the run's metric and tag."""
    import json

    import yaml

    params = yaml.safe_load((project / "params.yaml").read_text())
    params["prior"].update({"method": "given", "value": 0.9})  # the evens are half of U
    params["pupl"]["method"] = "pu_kmeans"
    params["pretrain"]["epochs"] = 1
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    for name in ("build_split", "estimate_prior", "pretrain"):
        stage(project, name)
    result = stage(project, "pupl_label")
    summary = json.loads((project / "data/pupl/summary.json").read_text())
    assert summary["method"] == "pu_kmeans" and summary["fallback"] is None
    assert "against a prior estimate of 0.900" in summary["degenerate"]
    assert "WARNING: degenerate pseudo-labels (pu_kmeans)" in result.stderr
    client = MlflowClient(tracking_uri)
    run = client.search_runs([client.get_experiment_by_name("pucl").experiment_id],
                             "tags.stage = 'pupl_label'")[0]
    assert run.data.metrics["pupl_degenerate"] == 1
    assert run.data.tags["pupl_degenerate"] == "true"


def test_classifier_objectives_record_their_prior_and_differ(finished_tiny, tmp_path,
                                                             tracking_uri, monkeypatch):
    """One pretrained encoder, four downstream objectives: each writes its summary and
    tags, the PU risks use the prior they are given, and the heads are not all equal."""
    import json

    import torch
    import yaml

    from tests.conftest import copy_project

    project = copy_project(finished_tiny, tmp_path / "proj")
    monkeypatch.setenv("PUCL_ROOT", str(project))
    report = json.loads((project / "data/prior/prior.json").read_text())
    params = yaml.safe_load((project / "params.yaml").read_text())
    heads = {}
    for objective, prior, want_prior, source in [
            ("pupl_ce", "estimate", None, None),
            ("naive_ce", "estimate", None, None),
            ("nnpu", "oracle", report["prior_true"], "oracle"),
            ("upu", 0.35, 0.35, "given"),
            ("nnpu", "estimate", report["prior"], "tedn")]:
        params["classifier"].update({"objective": objective, "prior": prior})
        (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
        stage(project, "train_classifier")
        summary = json.loads((project / "data/classifier/summary.json").read_text())
        assert summary == {"objective": objective, "prior": want_prior, "prior_source": source,
                           "finetune_epochs": 0, "degenerate": None,
                           "features": "encoder", "neighbours": 0, "members": 1,
                           "shipped": "refit"}
        heads[(objective, str(prior))] = torch.load(
            project / "data/classifier/head.pt")["head"]["state"]["linear.weight"]
    client = MlflowClient(tracking_uri)
    runs = client.search_runs([client.get_experiment_by_name("pucl").experiment_id],
                              "tags.stage = 'train_classifier'",
                              order_by=["attributes.start_time ASC"])
    assert [r.data.tags["classifier_objective"] for r in runs] == [
        "pupl_ce", "naive_ce", "nnpu", "upu", "nnpu"]
    assert runs[2].data.metrics["classifier_prior"] == report["prior_true"]
    assert runs[2].data.tags["classifier_prior_source"] == "oracle"
    weights = list(heads.values())
    assert all(not torch.equal(weights[0], w) for w in weights[1:])


def test_finished_pretraining_is_reused_by_fingerprint(project, tracking_uri):
    """With paths.pretrain_cache on, a second run with the same fingerprint copies the
    cached encoder (same bytes, says so, logs the same curve); another epoch count trains."""
    import yaml

    params = yaml.safe_load((project / "params.yaml").read_text())
    params["paths"]["pretrain_cache"] = "data/cache/pretrain"
    params["pretrain"]["epochs"] = 1
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    for name in ("build_split", "estimate_prior", "pretrain"):
        stage(project, name)
    out = project / "data/pretrain"
    first = {n: (out / n).read_bytes() for n in ("model.pt", "history.csv", "checkpoint.pt")}
    entries = list((project / "data/cache/pretrain").iterdir())
    assert len(entries) == 1 and not entries[0].name.startswith(".")
    for name in first:
        (out / name).unlink()
    again = stage(project, "pretrain")
    assert "reusing the finished pretraining" in again.stderr
    assert {n: (out / n).read_bytes() for n in first} == first

    client = MlflowClient(tracking_uri)
    runs = client.search_runs([client.get_experiment_by_name("pucl").experiment_id],
                              "tags.stage = 'pretrain'", order_by=["attributes.start_time ASC"])
    assert "pretrain_reused" not in runs[0].data.tags
    assert runs[1].data.tags["pretrain_reused"] == str(entries[0])
    history = client.get_metric_history(runs[1].info.run_id, "loss")
    assert [m.step for m in history] == [1]

    params["pretrain"]["epochs"] = 2
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    trained = stage(project, "pretrain")
    assert "reusing" not in trained.stderr
    assert len(list((project / "data/cache/pretrain").iterdir())) == 2


def test_pretraining_fingerprint_follows_the_training_inputs_content(project):
    """Same rows, same params, edited pixels: a cached encoder must not be reused."""
    import pandas as pd
    import torch

    from pucl.artifacts.pretraining import fingerprint
    from pucl.params.config import load_params

    params = load_params(project / "params.yaml")
    manifest = pd.DataFrame({"index": [0, 1], "split": "train", "pu": [1, 0],
                             "in_u": [True, True], "y": [1, 0]})
    images = torch.zeros(2, 1, 28, 28, dtype=torch.uint8)
    edited = images.clone()
    edited[1, 0, 5, 5] = 1
    assert fingerprint(params, manifest, None, images) == fingerprint(params, manifest, None,
                                                                      images.clone())
    assert fingerprint(params, manifest, None, images) != fingerprint(params, manifest, None,
                                                                      edited)


def test_pretraining_fingerprint_keys_what_auto_decides(project):
    """A cached encoder is keyed by the settings `auto` decided for its inputs: auto and
    the loss it decides share one entry; another loss, or rows decided otherwise, do not."""
    import pandas as pd
    import torch

    from pucl.artifacts.pretraining import fingerprint
    from pucl.params.config import load_params

    base = load_params(project / "params.yaml")
    manifest = pd.DataFrame({"index": [0, 1], "split": "train", "pu": [1, 0],
                             "in_u": [True, True], "y": [1, 0]})

    def printed(loss: str, images) -> str:
        params = base.model_copy(update={"pretrain": base.pretrain.model_copy(
            update={"loss": loss})})
        return fingerprint(params, manifest, None, images)

    rows, pixels = torch.zeros(2, 12), torch.zeros(2, 1, 28, 28, dtype=torch.uint8)
    assert base.pretrain.loss == "auto"
    assert printed("auto", rows) == printed("sscl", rows) != printed("pucl", rows)
    assert printed("auto", pixels) == printed("pucl", pixels) != printed("sscl", pixels)


def test_pretraining_fingerprint_follows_the_device(project, monkeypatch):
    """An encoder trained on CUDA is not the CPU's: neither is reused or resumed by a run
    on the other; auto is whichever device it resolves to."""
    import pandas as pd
    import torch

    from pucl.artifacts.pretraining import fingerprint
    from pucl.params.config import load_params

    manifest = pd.DataFrame({"index": [0], "split": "train", "pu": [1], "in_u": [True],
                             "y": [1]})
    images = torch.zeros(1, 1, 28, 28, dtype=torch.uint8)

    def printed(**base) -> str:
        params = load_params(project / "params.yaml")
        params = params.model_copy(update={"base": params.base.model_copy(update=base)})
        return fingerprint(params, manifest, None, images)

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    cpu = printed(device="cpu")
    assert printed(device="auto") == cpu
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    cuda = printed(device="cuda")
    assert cuda != cpu
    assert printed(device="auto") == cuda


def test_pretraining_members_are_the_single_runs_of_their_seeds(project, tracking_uri):
    """pretrain.members = 2 trains the encoder of base.seed and the one a single run with
    pretrain.seed = base.seed + 1 trains, bit for bit; the second of them comes from the
    cache that single run filled, and model.pt's first member is what readers load."""
    import pandas as pd
    import torch
    import yaml

    from pucl.artifacts.models import load_model

    params = yaml.safe_load((project / "params.yaml").read_text())
    params["paths"]["pretrain_cache"] = "data/cache/pretrain"
    params["pretrain"]["epochs"] = 1
    out = project / "data/pretrain"

    def pretrain(**section):
        params["pretrain"].update(section)
        (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
        return stage(project, "pretrain")

    for name in ("build_split", "estimate_prior"):
        stage(project, name)
    seeds = {}
    for seed in (1, 0):
        pretrain(seed=seed)
        seeds[seed] = torch.load(out / "model.pt", weights_only=True)["state_dict"]
    assert not torch.equal(seeds[0]["encoder.fc.0.weight"], seeds[1]["encoder.fc.0.weight"])
    log = pretrain(seed=None, members=2)
    assert log.stderr.count("reusing the finished pretraining") == 2  # both from the cache
    saved = torch.load(out / "model.pt", weights_only=True)
    (other,) = saved["other_members"]
    assert (saved["seed"], other["seed"]) == (0, 1)
    for want, got in ((seeds[0], saved["state_dict"]), (seeds[1], other["state_dict"])):
        assert all(torch.equal(want[k], got[k]) for k in want)
    loaded = load_model(out / "model.pt").state_dict()
    assert all(torch.equal(loaded[k], seeds[0][k]) for k in loaded)
    history = pd.read_csv(out / "history.csv")
    assert history["member"].tolist() == [0, 1]
    # each member's curve under its own name in MLflow: loss, loss_member1
    client = MlflowClient(tracking_uri)
    last = client.search_runs([client.get_experiment_by_name("pucl").experiment_id],
                              "tags.stage = 'pretrain'",
                              order_by=["attributes.start_time DESC"])[0]
    assert {"loss", "loss_member1"} <= set(last.data.metrics)
    assert [m.step for m in client.get_metric_history(last.info.run_id, "loss_member1")] == [1]
