"""What a user installs and reads: one top-level package, a short README, docs whose links
resolve, and nothing that points outside the repository."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile

import pytest

from tests.conftest import ROOT

LINK = re.compile(r"\]\(([^)#\s]+)(#[^)]*)?\)")


def tracked_text_files() -> list[str]:
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    return [f for f in files if f.endswith((".py", ".md", ".yaml", ".yml", ".toml", ".txt",
                                            ".cfg", "Makefile", ".lock"))
            and (ROOT / f).is_file()]  # a deletion not yet committed is gone


def test_the_wheel_holds_one_top_level_package(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(tmp_path), str(ROOT)], check=True, capture_output=True)
    (wheel,) = tmp_path.glob("pucl-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"pucl"}
    assert "pucl/stages/pretrain.py" in names and "pucl/flows/retrain.py" in names


def test_top_level_stages_and_flows_are_the_installed_packages():
    for name in ("stages", "flows"):
        assert (ROOT / name).is_symlink()
        assert (ROOT / name).resolve() == ROOT / "src" / "pucl" / name


def test_readme_is_short():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 150


@pytest.mark.parametrize("page", ["README.md", *sorted(
    str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))])
def test_every_relative_link_resolves(page):
    path = ROOT / page
    for target, _ in LINK.findall(path.read_text()):
        if "://" in target or target.startswith("mailto:"):
            continue
        assert (path.parent / target).exists(), f"{page} links to a missing {target}"


def test_nothing_points_outside_the_repository():
    outside = re.compile(r"\.\./shared|DESIGN\.md|/work/shared")
    offenders = [f for f in tracked_text_files()
                 if outside.search((ROOT / f).read_text(errors="replace"))
                 and f != "tests/test_packaging.py"]
    assert offenders == []


def test_the_install_shows_what_it_fetches():
    """A first `make run` installs for minutes: pip's lines stay on, after a line that
    says what is coming (a newcomer once watched a silent terminal)."""
    out = subprocess.run(["make", "-n", "-B", "setup"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    install = next(line for line in out.splitlines() if "-e '.[dev,bench]'" in line)
    assert "--quiet" not in install and " -q " not in install
    assert "installing pucl and its dependencies" in out
