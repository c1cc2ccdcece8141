"""The pucl command: help, params validation before any work."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from tests.conftest import ROOT
from tests.helpers import pucl_cli, run


def pucl(project, *args):
    return run([sys.executable, "-m", "pucl.cli", *args], project, check=False)


def test_help_lists_commands(project):
    result = pucl(project, "--help")
    assert result.returncode == 0
    for command in ("repro", "check", "ui"):
        assert command in result.stdout


def cli_texts():
    """(command path, text) of every help text of pucl's commands and their options."""
    import typer

    from pucl.cli import app

    def walk(command, path):
        for name, sub in getattr(command, "commands", {}).items():
            yield from walk(sub, f"{path} {name}")
        yield path, command.help or ""
        for param in command.params:
            yield f"{path} {param.name}", getattr(param, "help", None) or ""

    return list(walk(typer.main.get_command(app), "pucl"))


def test_no_help_text_loses_words_to_the_markdown_renderer():
    """The help is rendered as markdown, which drops an <html-like> word outside
    backticks without a trace (`run --help` once showed its default name as run---s)."""
    import re

    texts = cli_texts()
    assert any(path == "pucl run name" for path, _ in texts)  # the walk reaches options
    lost = [(path, text) for path, text in texts
            if re.search(r"<[A-Za-z]", re.sub(r"`[^`]*`", "", text))]
    assert lost == []


def test_run_help_shows_the_default_run_name(project):
    result = pucl(project, "run", "--help")
    assert result.returncode == 0 and "run-TIME-LOSS-sSEED" in result.stdout


def test_bad_params_refused_before_dvc_touches_outputs(project):
    marker = project / "data/evaluate/metrics.json"
    marker.parent.mkdir(parents=True)
    marker.write_text('{"accuracy": 0.5}')
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["pretrain"]["loss"] = "simclr"
    (project / "params.yaml").write_text(yaml.safe_dump(params))
    for command in ("check", "repro"):
        result = pucl(project, command)
        assert result.returncode == 2, result.stderr
        assert "pretrain.loss" in result.stderr and "simclr" in result.stderr
        assert "Traceback" not in result.stderr
    assert marker.read_text() == '{"accuracy": 0.5}'  # nothing was deleted or rewritten


def test_ablate_writes_one_row_per_objective_and_n_p(project):
    import pandas as pd

    result = pucl_cli(project, "ablate", "--losses", "pucl,sscl", "--n-p", "100", "--seeds",
                      "0", "--epochs", "1", "--out", "reports")
    assert result.returncode == 0, result.stderr
    # a hash such as 3289e3843056 reads as a number unless told
    table = pd.read_csv(project / "reports/ablation.csv", dtype={"commit": str})
    assert sorted(zip(table["loss"], table["n_p"], table["seed"], strict=True)) == [
        ("pucl", 100, 0),
        ("sscl", 100, 0)]
    assert table[["knn_accuracy", "pseudo_label_accuracy", "accuracy"]].stack().between(0, 1).all()
    markdown = (project / "reports/ablation.md").read_text()
    assert markdown.count("| pucl |") == 1 and markdown.count("| sscl |") == 1
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=project, capture_output=True,
                          text=True, check=True).stdout.strip()
    assert set(table["commit"]) == {head[:12]}  # the commit that measured the rows


def test_ablate_refuses_unknown_objective(project, monkeypatch):
    result = pucl_cli(project, "ablate", "--losses", "pucl,simclr")
    assert result.returncode == 2 and "unknown loss 'simclr'" in result.stderr


def test_ablate_validates_every_configuration_before_running(project, monkeypatch):
    result = pucl_cli(project, "ablate", "--losses", "pucl,sscl", "--n-p",
                        "100", "--seeds", "0", "--epochs", "0")
    assert result.returncode == 2 and "pretrain.epochs" in result.stderr
    assert not (project / "data/runs").exists()  # nothing ran



def test_flow_commands_refuse_bad_input_before_starting_prefect(project, monkeypatch,
                                                                tracking_uri):
    from mlflow.tracking import MlflowClient

    MlflowClient(tracking_uri).create_experiment("pucl")  # as the first run leaves it
    (project / "bad_sweep.yaml").write_text("name: s\ngrid:\n  split.n_p: [300, -1]\n")
    (project / "typo_sweep.yaml").write_text("name: s\ngird: {}\n")
    cases = [
        (("run", "--set", "pretrain.loss=simclr"), "pretrain.loss"),
        (("run", "--set", "pretrain.temprature=0.1"), "did you mean 'pretrain.temperature'"),
        (("run", "--set", "n_p"), "expected key=value"),
        (("sweep", "--grid", "missing.yaml"), "sweep file not found: missing.yaml"),
        (("sweep", "--grid", "bad_sweep.yaml"), "sweep point n_p=-1,s0: invalid parameter "
                                                "'split.n_p' = -1"),
        (("sweep", "--grid", "typo_sweep.yaml"), "unknown parameter 'gird'"),
        (("sweep", "--grid", "bad_sweep.yaml", "--runner", "ray"), "invalid --runner 'ray'"),
        (("serve", "--cron", "every night"), "invalid --cron 'every night'"),
        (("compare", "--sweep", "nope"), "no sweep"),
        (("compare", "--by", "pretrain.los"), "no finished pipeline runs"),
    ]
    for args, message in cases:
        result = pucl_cli(project, *args)
        assert result.returncode == 2, (args, result.stderr)
        assert message in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, (args, result.stderr)
    written = {str(p.relative_to(project)) for p in (project / "data").rglob("*")}
    assert written == {"data/dataset", "data/dataset/README.md"}  # nothing ran or was written


@pytest.mark.parametrize("args, message", [
    (["bench", "no-such-preset"], "unknown preset 'no-such-preset' (allowed: cifar, cifar-iii"),
    (["bench", "fmnist-i", "--variants", "pucl_pupl,zz"], "unknown variant 'zz'"),
    (["bench", "fmnist-i", "--seeds", "0,x"], "comma-separated integers"),
    (["bench", "fmnist-i", "--set", "prior.method=pen"], "'pen'"),
    (["bench", "fmnist-i", "--set", "prior.method"], "prior.method"),
    (["run", "--preset", "fmnist-ii", "--variant", "zz"],
     "unknown variant 'zz' of preset fmnist-ii"),
    (["run", "--preset", "no-such-preset"], "unknown preset 'no-such-preset'"),
    (["run", "--variant", "zz"], "--variant 'zz' needs --preset"),
    (["check", "--preset", "fmnist-ii", "--set", "pretrain.members=0"], "pretrain.members"),
])
def test_bench_refuses_bad_presets_in_one_line(project, monkeypatch, args, message):
    import shutil

    shutil.copytree(ROOT / "params" / "presets", project / "params" / "presets")
    result = pucl_cli(project, *args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr


def test_a_preset_run_takes_the_default_variant_under_the_users_set(project):
    """pucl run/check --preset: the preset's set, then its default (or --variant), then
    --set; what check validates is what run would run."""
    from pucl.cli._common import preset_overrides, validated_overrides
    from pucl.stages.runner import resolve_params

    (project / "mine.yaml").write_text(yaml.safe_dump({
        "name": "mine", "set": {"split.n_p": 300, "pretrain.epochs": 3},
        "variants": {"short": {"pretrain.epochs": 1}, "long": {"pretrain.epochs": 7}},
        "default": "long"}))
    base, tags = preset_overrides(project, str(project / "mine.yaml"), None)
    assert tags == {"preset": "mine", "variant": "long"}
    params = resolve_params(project, validated_overrides(project, ["split.n_p=200"], base))
    assert (params.split.n_p, params.pretrain.epochs) == (200, 7)
    base, tags = preset_overrides(project, str(project / "mine.yaml"), "short")
    assert resolve_params(project, validated_overrides(project, None, base)).pretrain.epochs == 1
    result = pucl_cli(project, "check", "--preset", "mine.yaml", "--variant", "short")
    assert result.returncode == 0, result.stderr
    assert "with preset mine variant short" in result.stdout


def test_every_preset_is_a_short_protocol_of_valid_params():
    """A preset states a protocol: a recommended variant and a handful of baselines (60
    variants at most in all), each point valid params; the paper's protocols carry its
    numbers for every baseline they name."""
    from pucl.data import DATASETS
    from pucl.params.sweeps import expand, load_sweep, reference_of
    from pucl.stages.runner import resolve_params

    presets = sorted((ROOT / "params" / "presets").glob("*.yaml"))
    specs = {path.stem: load_sweep(path) for path in presets}
    assert all(spec.name == name for name, spec in specs.items())
    assert sum(len(spec.variants) for spec in specs.values()) <= 60
    for name, spec in specs.items():
        assert spec.default in spec.variants, name  # pucl run --preset NAME runs it
        # our own comparisons (no paper number) and figure-only protocols carry none
        ours = name in ("mnist5k", "methods-mnist5k", "cifar-objectives")
        assert bool(spec.reference) != ours, name
        points = expand(spec)
        for point in points:
            params = resolve_params(ROOT, point.overrides)
            assert params.base.seed == point.seed
            assert params.data.task in DATASETS[params.data.dataset].tasks
            if params.data.dataset == "stl10u":  # U without labels: no oracle anywhere
                assert "oracle" not in (params.pretrain.prior, params.classifier.prior)
            if spec.reference and point.variant in spec.reference:  # a number per point
                assert reference_of(spec, point.variant,
                                    {k: point.overrides[k] for k in spec.grid}) is not None
        # a protocol's `set` is its first grid point, which pucl run --preset runs
        assert all(spec.set.get(key) == values[0] for key, values in spec.grid.items()), name


def test_the_recommended_variants_score_the_views_their_reports_measured():
    from pucl.params.sweeps import load_sweep, variant_overrides
    from pucl.stages.runner import resolve_params

    for preset, views in (("fmnist-i", ("hflip", 2)), ("fmnist-ii", ("none", 0))):
        _, overrides = variant_overrides(load_sweep(ROOT / "params" / "presets" / f"{preset}.yaml"))
        evaluate = resolve_params(ROOT, overrides).evaluate
        assert (evaluate.tta, evaluate.tta_shift) == views, preset


def test_each_project_serves_its_own_deployment(tmp_path):
    """Two projects served under one name in one Prefect database ran each other's
    scheduled passes: the default deployment name is the project's own."""
    from pucl.cli.schedule import deployment_name

    a, b = tmp_path / "one" / "pucl", tmp_path / "two" / "pucl"  # the same directory name
    a.mkdir(parents=True)
    b.mkdir(parents=True)
    (tmp_path / "link").symlink_to(a)
    assert deployment_name(a) != deployment_name(b)
    assert deployment_name(tmp_path / "link") == deployment_name(a)  # one project, one name
    assert deployment_name(a).startswith("pucl-") and len(deployment_name(a)) == len("pucl-") + 8


@pytest.mark.parametrize("venv_on_path", [True, False])
def test_the_closing_hint_names_a_pucl_that_runs_as_printed(monkeypatch, tmp_path,
                                                            venv_on_path):
    """After `make run` the virtual environment is not activated: the hint then names
    the script inside it, relative to where the user stands."""
    import os
    import shlex
    from pathlib import Path

    from pucl.cli._common import score_hint

    bin_dir = Path(sys.executable).parent
    monkeypatch.setenv("PATH", os.pathsep.join(
        [str(bin_dir)] * venv_on_path + ["/usr/bin", "/bin"]))
    monkeypatch.chdir(ROOT)
    hint = score_hint(ROOT / "data" / "runs" / "r1")
    command = hint.split(": ", 1)[1]
    assert command.endswith("--model data/runs/r1")
    program = shlex.split(command)[0]
    assert (program == "pucl") == venv_on_path
    shown = subprocess.run([program, "predict", "--help"], capture_output=True, text=True,
                           cwd=ROOT, env={**os.environ}, check=False)
    assert shown.returncode == 0 and "--model" in shown.stdout


def test_pucl_runs_table_puts_results_and_estimates_before_diagnostics():
    """`pucl run` and `pucl repro` print one table: test results, then the estimates from
    P and U with their intervals, then the diagnostics (a P-and-U run has no test
    results, so its estimates come first)."""
    from rich.console import Console

    from pucl.cli._common import sections_table

    metrics = {"val_n_p": 20, "kmeans_potential": 359.78, "val_est_accuracy": 0.895,
               "val_est_accuracy_low": 0.707, "val_est_accuracy_high": 0.974,
               "prior_estimate": 0.5248, "prior_estimate_low": 0.4132,
               "prior_estimate_high": 0.6364}
    console = Console(record=True, width=100)
    console.print(sections_table(metrics, "run"))
    text = console.export_text()
    order = [text.index(s) for s in ("from P and U alone", "0.8950 [0.707, 0.974]",
                                     "0.5248 [0.413, 0.636]", "diagnostics",
                                     "kmeans_potential")]
    assert order == sorted(order) and "test results" not in text
