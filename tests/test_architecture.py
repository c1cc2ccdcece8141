"""The package's shape: docs/architecture.md's layer table says what the import-linter
contract enforces, the top of src/pucl stays small, and module names do not repeat."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "pucl"


def contract_layers() -> list[tuple[set[str], bool]]:
    """The `layers` contract of pyproject.toml: per layer, its modules and whether they
    must be independent of each other (`|`) or may import each other (`:`)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    contract = next(c for c in config["contracts"] if c["id"] == "layers")
    return [({m.strip() for m in re.split(r"[|:]", layer)}, "|" in layer)
            for layer in contract["layers"]]


def documented_layers() -> list[tuple[set[str], bool]]:
    """The layer table of docs/architecture.md: per row, the packages in its second
    column and whether they are joined by "or" (independent)."""
    lines = (ROOT / "docs" / "architecture.md").read_text().splitlines()
    start = next(i for i, line in enumerate(lines)
                 if line.startswith("| layer (highest first) | packages |"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cell = line.split("|")[2]
        rows.append((set(re.findall(r"`(pucl[\w.]*)`", cell)), " or " in cell))
    return rows


def test_the_documented_layers_are_the_contracts():
    assert documented_layers() == contract_layers()


def test_every_module_has_a_layer():
    """Each subpackage and module directly under src/pucl is named by the contract (or,
    for pucl.data, each of its modules), so no new code lands outside the layers."""
    named = set().union(*(modules for modules, _ in contract_layers()))
    for path in sorted(PACKAGE.iterdir()):
        if path.name.startswith(("_", ".")) or path.suffix not in ("", ".py"):
            continue
        if path.is_dir() and path.name == "data":
            inside = {f"pucl.data.{p.stem}" for p in path.glob("*.py") if p.stem != "__init__"}
            assert inside <= named, f"pucl.data modules outside the layers: {inside - named}"
        elif path.is_dir() and not (path / "__init__.py").exists():
            continue
        else:
            assert f"pucl.{path.stem}" in named, f"pucl.{path.stem} is in no layer"


def test_the_top_of_the_package_is_small():
    """At most 8 modules directly under src/pucl: the rest live in packages named after
    their layer or concern."""
    loose = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(loose) <= 8, loose


def test_module_names_do_not_repeat_the_registry():
    """One module called `registry`: the registries every method is looked up in."""
    found = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("registry.py"))
    assert found == ["registry.py"]


def test_no_private_name_is_imported_from_another_module():
    """A name that starts with `_` is its module's own; another module that needs it
    needs a public name (private modules such as cli._common may be imported whole)."""
    import ast

    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pucl")):
                continue
            where = PACKAGE.parent / node.module.replace(".", "/")
            found += [f"{path.relative_to(PACKAGE)}: {node.module}.{alias.name}"
                      for alias in node.names if alias.name.startswith("_")
                      and not (where / f"{alias.name}.py").exists()
                      and not (where / alias.name).is_dir()]
    assert not found, found


def test_functions_and_stage_modules_stay_short():
    """No function over 60 lines; each stage module (one per DVC stage) at most 120: a
    stage says what it computes, and its files and tracking live in the adapters."""
    import ast

    from pucl.stages import STAGES

    long = [f"{path.relative_to(PACKAGE)}:{node.name} ({node.end_lineno - node.lineno + 1})"
            for path in sorted(PACKAGE.rglob("*.py"))
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > 60]
    assert not long, long
    stages = {name: len((PACKAGE / "stages" / f"{name}.py").read_text().splitlines())
              for name in STAGES}
    assert max(stages.values()) <= 120, stages
