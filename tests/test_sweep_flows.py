"""The sweep flow (`pucl sweep`, `pucl bench`) on tiny params: local process pools, an
existing Dask cluster, and points that share one pretraining. Against a temporary Prefect
server and sqlite MLflow store (tests/conftest.py), read back with a plain MlflowClient."""

from __future__ import annotations

import logging

import pandas as pd
import pytest
import yaml

from tests.helpers import STAGES, artifact_paths, children, runs

pytestmark = pytest.mark.filterwarnings("ignore")

# The sweep's points need a prior, not its estimation (test_prior_heldout, test_flows)
GIVEN_PRIOR = {"prior.method": "given", "prior.value": 0.5}


def compare(*args: str):
    from typer.testing import CliRunner

    from pucl.cli import app

    result = CliRunner().invoke(app, ["compare", *args])
    assert result.exit_code == 0, (result.output, result.stderr)
    return result


def test_sweep_runs_every_point_and_compares_them(flows_env, harness, caplog):
    """`--runner threads` (the process pools of pucl's default runner start their workers
    in test_bench_... and test_points_sharing_...)."""
    from prefect.task_runners import ThreadPoolTaskRunner

    from pucl.flows.sweep import sweep

    spec = {"name": "tiny", "seeds": [0, 1], "grid": {"split.n_p": [100, 200]},
            "set": {"pretrain.epochs": 1, "split.val_fraction": 0.2, **GIVEN_PRIOR}}
    flow_logs = logging.getLogger("prefect.flow_runs")  # Prefect's own: not propagated
    flow_logs.addHandler(caplog.handler)
    try:
        result = sweep.with_options(task_runner=ThreadPoolTaskRunner(max_workers=1))(
            spec=spec, project=str(flows_env["root"]))
    finally:
        flow_logs.removeHandler(caplog.handler)
    client = flows_env["client"]
    sweep_run = client.get_run(result["mlflow_run_id"])
    assert sweep_run.data.tags["kind"] == "sweep" and sweep_run.info.status == "FINISHED"
    points = children(client, result["mlflow_run_id"])
    assert sorted(r.info.run_name for r in points) == sorted(
        ["n_p=100,s0", "n_p=100,s1", "n_p=200,s0", "n_p=200,s1"])
    for r in points:
        assert r.data.tags["kind"] == "pipeline"
        assert len(children(client, r.info.run_id)) == len(STAGES)
        n_p = int(r.data.params["split.n_p"])
        # 20% of the labelled positives went to the validation part
        assert (r.data.metrics["n_p"], r.data.metrics["val_n_p"]) == (0.8 * n_p, 0.2 * n_p)
        assert (flows_env["root"] / "data/runs/tiny" / r.info.run_name / "data/evaluate"
                / "metrics.json").exists()
    assert {"comparison/comparison.csv", "comparison/accuracy_vs_gamma.png"} <= artifact_paths(
        client, result["mlflow_run_id"])
    # where the points were, one line per change, ending with all four done; the workers'
    # progress files are gone with them
    records = {id(r): r for r in caplog.records}.values()  # a record may come twice
    progress = [r.getMessage() for r in records if "points done" in r.getMessage()]
    assert progress[0].startswith("sweep tiny: 0/4 points done")
    assert progress[-1] == "sweep tiny: 4/4 points done, 0 running, 0 queued"
    assert all(a != b for a, b in zip(progress, progress[1:], strict=False))
    assert not list((flows_env["root"] / "data/runs/tiny").rglob("progress.json"))

    # `pucl compare` reads the sweep back from MLflow: one row per point. (In this
    # process: the command's own start is test_cli's.)
    shown = compare("--sweep", "tiny")
    table = pd.read_csv(flows_env["root"] / "data/runs/tiny/comparison.csv")
    assert len(table) == 4
    assert {"split.n_p", "base.seed", "gamma", "accuracy"} <= set(table.columns)
    for name in table["run"]:
        assert name in shown.stdout
    # the choice a PU user could make: the best validation estimate, named
    best = table.loc[table["val_est_accuracy"].idxmax(), "run"]
    assert (f"chosen by the validation estimate (val_est_accuracy "
            f"{table['val_est_accuracy'].max():.4f}, from P and U alone): run={best}"
            in shown.stdout)
    assert f"run={best}" in (flows_env["root"] / "data/runs/tiny/comparison.md").read_text()
    grouped = compare("--sweep", "tiny", "--by", "split.n_p", "--out",
                      str(flows_env["root"] / "grouped"))
    by_n_p = pd.read_csv(flows_env["root"] / "grouped/comparison.csv")
    assert list(by_n_p["n"]) == [2, 2] and "accuracy_std" in by_n_p
    for n_p, part in table.groupby("split.n_p"):
        assert by_n_p.set_index("split.n_p").loc[n_p, "accuracy"] == pytest.approx(
            part["accuracy"].mean())
    assert "grouped" in grouped.stdout


def test_bench_runs_variants_and_prints_them_beside_the_reference(flows_env, harness):
    """`pucl bench FILE`: variants x seeds through the sweep flow, grouped by variant, the
    reference beside each. (In this process, on this module's Prefect server and threads:
    test_cli's `pucl ablate` runs the same flow as a user's command, with its own server
    and process pool.)"""
    preset = flows_env["root"] / "tiny-preset.yaml"
    preset.write_text(yaml.safe_dump({
        "name": "tiny-bench", "seeds": [0, 1], "set": {"pretrain.epochs": 4, **GIVEN_PRIOR},
        "variants": {"pucl_pupl": {"pretrain.loss": "pucl"},
                     "pucl_nnpu": {"pretrain.loss": "pucl", "classifier.objective": "nnpu",
                                   "classifier.prior": "oracle"}},
        "reference": {"pucl_pupl": 91.8}}))
    from typer.testing import CliRunner

    from pucl.cli import app

    result = CliRunner().invoke(app, ["bench", str(preset), "--seeds", "0", "--variants",
                                      "pucl_pupl,pucl_nnpu", "--set", "pretrain.epochs=1",
                                      "--runner", "threads", "--refit"])
    assert result.exit_code == 0, result.stderr[-3000:]
    table = pd.read_csv(flows_env["root"] / "data/runs/tiny-bench/comparison.csv")
    assert sorted(table["variant"]) == ["pucl_nnpu", "pucl_pupl"]
    assert list(table["n"]) == [1, 1]  # --seeds 0 replaced the preset's two seeds
    rows = {line.split("│")[1].strip(): line for line in result.stdout.splitlines()
            if line.count("│") > 3 and "pucl_" in line}
    accuracy = table.set_index("variant")["accuracy"]
    assert f"{100 * accuracy['pucl_pupl']:.1f} +- 0.0" in rows["pucl_pupl"]
    assert "91.8" in rows["pucl_pupl"] and "91.8" not in rows["pucl_nnpu"]
    # one variant chosen by its validation estimate, the table's own column says which:
    # pucl_nnpu reads the true prior, which a PU user does not have, so never pucl_nnpu
    estimate = table.set_index("variant")["val_est_accuracy"]
    pick = "pucl_pupl"
    assert (f"chosen by the validation estimate (val_est_accuracy {estimate[pick]:.4f}, from "
            f"P and U alone): variant={pick}") in result.stdout
    assert "yes" in rows[pick] and "yes" not in rows[min(set(rows) - {pick})]
    client = flows_env["client"]
    tagged = runs(client, "tags.sweep = 'tiny-bench' and tags.kind = 'pipeline'")
    assert sorted(r.data.tags["variant"] for r in tagged) == ["pucl_nnpu", "pucl_pupl"]
    nnpu = next(r for r in tagged if r.data.tags["variant"] == "pucl_nnpu")
    assert nnpu.data.params["classifier.objective"] == "nnpu"
    assert {r.data.params["pretrain.epochs"] for r in tagged} == {"1"}  # --set over the preset
    # --refit: the chosen variant trained again on every labelled positive and all of U
    again = runs(client, "tags.refit_of = 'tiny-bench' and tags.kind = 'pipeline'")
    assert [r.data.tags["variant"] for r in again] == [pick]
    assert again[0].data.params["split.val_fraction"] == "0.0"
    chose = next(r for r in tagged if r.data.tags["variant"] == pick)
    assert again[0].data.metrics["n_p"] == (chose.data.metrics["n_p"]
                                            + chose.data.metrics["val_n_p"])
    assert "val_est_accuracy" not in again[0].data.metrics
    refitted = pd.read_csv(flows_env["root"] / "data/runs/tiny-bench-refit/comparison.csv")
    assert (f"refit on every labelled positive and all of U (variant={pick}): test accuracy "
            f"{100 * refitted['accuracy'].iloc[0]:.1f}") in result.stdout


def test_sweep_on_an_existing_dask_cluster(flows_env, harness):
    from distributed import LocalCluster
    from prefect_dask import DaskTaskRunner

    from pucl.flows.sweep import sweep

    spec = {"name": "dask", "seeds": [0], "grid": {"pretrain.loss": ["sscl"]},
            "set": {"pretrain.epochs": 1, **GIVEN_PRIOR}}
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster:
        result = sweep.with_options(task_runner=DaskTaskRunner(
            address=cluster.scheduler_address))(spec=spec, project=str(flows_env["root"]))
    assert len(result["points"]) == 1
    assert result["points"][0]["metrics"]["accuracy"] > 0.5
    assert len(children(flows_env["client"], result["mlflow_run_id"])) == 1


@pytest.mark.slow  # a pool of two processes, each starting a pipeline (docs/development.md)
def test_points_sharing_an_encoder_train_it_once(flows_env, harness, monkeypatch):
    """Two variants of one seed differ only downstream of pretraining: with two workers
    they would both start training the same encoder at once. The second waits for the
    first and restores its encoder from the cache."""
    from prefect.task_runners import ProcessPoolTaskRunner

    from pucl import tracking
    from pucl.flows.sweep import sweep

    # in one process (PYTEST_WORKERS=0), test_flows' unreachable server has turned
    # tracking off for the rest of it
    monkeypatch.setenv(tracking.TRACKING_ENV, "on")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", flows_env["uri"])

    spec = {"name": "shared", "seeds": [0],
            "set": {"pretrain.epochs": 1, "paths.pretrain_cache": "data/cache/shared",
                    **GIVEN_PRIOR},
            "variants": {"ce": {}, "nnpu": {"classifier.objective": "nnpu"}}}
    # one worker per point, as pucl's default; another pretraining is another cache
    # entry (test_stages: test_finished_pretraining_is_reused_by_fingerprint)
    sweep.with_options(task_runner=ProcessPoolTaskRunner(max_workers=2))(
        spec=spec, project=str(flows_env["root"]))
    shared = runs(flows_env["client"], "tags.sweep = 'shared' and tags.kind = 'pipeline'")
    reused = {r.info.run_name: r.data.metrics["pretrain_reused"] for r in shared}
    assert set(reused) == {"variant=ce,s0", "variant=nnpu,s0"}
    assert sorted(reused.values()) == [0.0, 1.0]  # whichever started first trained it
    assert len(list((flows_env["root"] / "data/cache/shared").iterdir())) == 1
