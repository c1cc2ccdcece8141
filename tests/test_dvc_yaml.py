"""dvc.yaml agrees with the code: each stage's code deps are exactly the project files it
imports (so editing the nnPU risk does not retrain the encoder, and no import is missed),
its params are the sections the stage reads, and its command runs that stage."""

from __future__ import annotations

import pytest
import yaml

from pucl.stages import NUMPY_ONLY_STAGES, STAGES
from tests.conftest import ROOT
from tests.dvc_deps import code_deps

SPEC = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]


def test_dvc_yaml_has_exactly_the_pipeline_stages_in_order():
    assert list(SPEC) == list(STAGES)


def test_dvc_lock_records_no_retired_stage():
    # dvc keeps a removed stage's lock entry; one left behind misleads whoever reads the lock
    locked = yaml.safe_load((ROOT / "dvc.lock").read_text())["stages"]
    assert set(locked) <= set(STAGES), f"stale entries {sorted(set(locked) - set(STAGES))}"


@pytest.mark.parametrize("name", STAGES)
def test_code_deps_are_exactly_the_imported_modules(name):
    declared = {d for d in SPEC[name]["deps"] if "${" not in d}
    derived = set(code_deps(name))
    assert declared == derived, (
        f"{name}: missing {sorted(derived - declared)}, not imported "
        f"{sorted(declared - derived)}; run `python -m tests.dvc_deps` to rewrite dvc.yaml")


def covers(stage: str, path: str) -> bool:
    """Whether a change to `path` reruns `stage` (a file dep, or a directory holding it)."""
    return any(path == dep or path.startswith(f"{dep}/") for dep in SPEC[stage]["deps"])


def test_editing_the_pu_risk_does_not_invalidate_pretraining():
    assert not covers("pretrain", "src/pucl/classify/pu_risk.py")
    assert covers("train_classifier", "src/pucl/classify/pu_risk.py")


def test_a_new_prior_estimator_module_is_a_dependency_without_editing_dvc_yaml():
    assert covers("estimate_prior", "src/pucl/prior/a_new_estimator.py")
    assert covers("estimate_prior", "src/pucl/prior/kernel_mean.py")


def test_no_stage_depends_on_the_tracking_harness():
    for name in STAGES:
        for harness in ("src/pucl/tracking.py", "src/pucl/stages/_harness.py"):
            assert not covers(name, harness), (name, harness)


@pytest.mark.parametrize("name", STAGES)
def test_params_sections_match_what_the_stage_logs(name):
    sections = {p for p in SPEC[name]["params"] if not p.startswith("base.")}
    assert sections == set(STAGES[name])
    # a stage that runs torch reruns when the device changes
    torch_stage = name not in NUMPY_ONLY_STAGES
    assert {p for p in SPEC[name]["params"] if p.startswith("base.")} == \
        {"base.seed", *(("base.device",) if torch_stage else ())}
    assert SPEC[name]["cmd"] == f"python -m pucl.stages {name}"
