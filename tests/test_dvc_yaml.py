"""dvc.yaml lists, for every stage, each project module the stage imports, and the params
sections the stage reads."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from stages._common import STAGE_SECTIONS
from tests.conftest import ROOT
from tests.helpers import STAGES

SPEC = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]


@pytest.mark.parametrize("name", STAGES)
def test_deps_cover_imported_modules(name):
    code = (f"import importlib, os, sys; importlib.import_module('stages.{name}'); "
            "print('\\n'.join(os.path.relpath(m.__file__) for n, m in list(sys.modules.items()) "
            "if n.split('.')[0] in ('pucl', 'stages') and getattr(m, '__file__', None)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.split()
    imported = {f for f in out if not f.endswith("stages/__init__.py")
                and f != "src/pucl/__init__.py"}
    missing = imported - set(SPEC[name]["deps"])
    assert not missing, f"{name} imports modules missing from its dvc.yaml deps: {missing}"


@pytest.mark.parametrize("name", STAGES)
def test_params_sections_match_what_the_stage_logs(name):
    sections = {p for p in SPEC[name]["params"] if p != "base.seed"}
    assert sections == set(STAGE_SECTIONS[name])
    assert SPEC[name]["cmd"] == f"python -m stages.{name}"
