"""The code half of each stage's `deps:` in dvc.yaml, derived from what the stage imports.

A stage's code deps are the project files a fresh interpreter loads for
`import pucl.stages.<name>`, less the two package markers every stage shares. The harness
around the stages (MLflow tracking, error exits: `pucl.stages._harness`) is not among them,
since it cannot change a stage's outputs. `python -m tests.dvc_deps` rewrites the lists in
dvc.yaml in place (comments kept); tests/test_dvc_yaml.py fails when they drift.
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
from pathlib import Path

from pucl.stages import STAGES

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_MARKERS = {"src/pucl/__init__.py", "src/pucl/stages/__init__.py"}
# One interpreter loads the heavy libraries, then forks a child per stage that imports the
# stage, lets every registry it reached import its methods (they load on first lookup at
# run time), and lists the project files loaded. Preloading libraries loads no project
# file, so each child sees what a fresh interpreter importing its stage would.
_LIST = """
import importlib, json, os, sys
import matplotlib, numpy, pandas, pydantic, scipy, sklearn, torch, yaml  # no project files
names, found = {names!r}, {{}}
for name in names:
    read, write = os.pipe()
    if os.fork() == 0:
        os.close(read)
        importlib.import_module('pucl.stages.' + name)
        from pucl.registry import Registry
        for module in list(sys.modules.values()):
            for value in list(vars(module).values()) if module else ():
                if isinstance(value, Registry):
                    value.names()
        files = [os.path.relpath(m.__file__) for n, m in list(sys.modules.items())
                 if n.split('.')[0] == 'pucl' and getattr(m, '__file__', None)]
        with os.fdopen(write, 'w') as out:
            out.write('\\n'.join(files))
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as got:
        found[name] = got.read().split()
    os.wait()
print(json.dumps(found))
"""


@functools.lru_cache(maxsize=1)
def _imported() -> dict[str, set[str]]:
    out = subprocess.run([sys.executable, "-c", _LIST.format(names=list(STAGES))], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    return {name: set(files) - PACKAGE_MARKERS for name, files in json.loads(out).items()}


def imported_files(name: str) -> set[str]:
    return _imported()[name]


def code_deps(name: str) -> list[str]:
    """The imported files, a package whose every module is imported written as its
    directory (a registry imports its whole package, so a new method module is covered
    without editing dvc.yaml; .dvcignore keeps __pycache__ out of the hash)."""
    files = imported_files(name)
    packages = []
    for init in sorted((ROOT / "src" / "pucl").glob("*/**/__init__.py")):
        package = init.parent.relative_to(ROOT)
        modules = {str(f.relative_to(ROOT)) for f in (ROOT / package).rglob("*.py")}
        if modules <= files | PACKAGE_MARKERS and not any(
                str(package).startswith(f"{outer}/") for outer in packages):
            packages.append(str(package))
    covered = {f for f in files if any(f.startswith(f"{d}/") for d in packages)}
    return sorted((files - covered) | set(packages))


def rewrite(text: str, deps: dict[str, list[str]]) -> str:
    """dvc.yaml with each stage's code deps replaced (its data deps, `${...}`, kept)."""
    lines, out, stage, in_deps = text.splitlines(), [], None, False
    for line in lines:
        header = re.match(r"^  ([a-z_]+):", line)
        if header:
            stage = header.group(1)
        if in_deps and not line.startswith("      - "):
            out.extend(f"      - {path}" for path in deps[stage])
            in_deps = False
        if in_deps and "${" not in line:
            continue  # an old code dep
        out.append(line)
        if line == "    deps:" and stage in deps:
            in_deps = True
    return "\n".join(out) + "\n"


def main() -> None:
    path = ROOT / "dvc.yaml"
    path.write_text(rewrite(path.read_text(), {name: code_deps(name) for name in STAGES}))
    print(f"rewrote the code deps of {len(STAGES)} stages in {path}")


if __name__ == "__main__":
    main()
