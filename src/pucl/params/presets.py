"""Presets: named sweep files under params/presets/ (a dataset's protocol, its variants
and the papers' numbers), found in the project or in the checkout pucl is installed from."""

from __future__ import annotations

from pathlib import Path

from pucl.errors import ParamsError
from pucl.params.sweeps import SweepSpec, load_sweep

PRESETS = Path("params") / "presets"


def preset_path(preset: str | Path, roots: list[Path] | None = None) -> Path:
    """A preset by name (params/presets/NAME.yaml under the first of `roots` that has
    one: by default the project around the current directory, then the checkout pucl is
    installed from) or a YAML file's path; a one-line ParamsError naming the presets."""
    text = str(preset)
    if text.endswith((".yaml", ".yml")) or Path(text).is_file():
        if not Path(text).is_file():
            raise ParamsError(f"preset file not found: {text}")
        return Path(text)
    if roots is None:
        from pucl.tracking.location import project_root

        roots = [project_root(), Path(__file__).resolve().parents[3]]
    directory = next((root / PRESETS for root in roots if (root / PRESETS).is_dir()),
                     roots[0] / PRESETS)
    path = directory / f"{text}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in directory.glob("*.yaml"))
        raise ParamsError(f"unknown preset {text!r} (allowed: {', '.join(known) or 'none'}, "
                          "or a sweep file path)")
    return path


def preset_summary(path: Path) -> str:
    """What a preset is: the first sentence of the comment it opens with."""
    from pucl.registry import first_sentence

    lines = path.read_text().splitlines()
    lead = [line.lstrip("#").strip() for line in lines[:next(
        (i for i, line in enumerate(lines) if not line.startswith("#")), len(lines))]]
    return first_sentence(" ".join(lead))


def load_preset(preset: str | Path, roots: list[Path] | None = None) -> SweepSpec:
    return load_sweep(preset_path(preset, roots))
