"""Setting values in a params file the way a person would edit it: each value changed in
place, its comment and every other line kept, so nothing the user wrote is lost.

Only two-level keys (`section.key`) of a section that exists are written; a key the
section does not have yet is added as its first line. The edited text must still parse
and validate as params before it replaces the file (atomically).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from pucl.errors import ParamsError
from pucl.io import atomic_path
from pucl.params.config import load_yaml


def _scalar(value: Any) -> str:
    """`value` as a YAML scalar that reads back as itself."""
    text = yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()
    if "\n" in text:
        raise ParamsError(f"only single values can be written into a params file, got {value!r}")
    return text


def _section(lines: list[str], section: str) -> tuple[int, int]:
    """(first line, end) of the top-level `section:` block."""
    start = next((i for i, line in enumerate(lines)
                  if re.match(rf"^{re.escape(section)}:\s*(#.*)?$", line)), None)
    if start is None:
        raise ParamsError(f"the params file has no section {section!r}")
    end = next((i for i in range(start + 1, len(lines))
                if lines[i].strip() and not lines[i][0].isspace() and lines[i][0] != "#"),
               len(lines))
    return start, end


def set_line(lines: list[str], dotted: str, value: Any) -> str | None:
    """Set `section.key` to `value` in `lines` (edited in place); the old value's text,
    or None where the key was added."""
    section, _, key = dotted.partition(".")
    if not key or "." in key:
        raise ParamsError(f"{dotted!r}: only section.key settings can be written here")
    start, end = _section(lines, section)
    # the section's own keys sit at its first key's indent; deeper ones belong to others
    indent = next((re.match(r"^( +)", lines[i]).group(1) for i in range(start + 1, end)
                   if re.match(r"^ +[^\s#]", lines[i])), "  ")
    for i in range(start + 1, end):
        found = re.match(rf"^({indent}){re.escape(key)}:( *)([^#\n]*?)( *#.*)?(\n?)$",
                         lines[i])
        if found:
            indent, gap, old, comment, newline = found.groups()
            new, comment = _scalar(value), comment or ""
            lead = len(comment) - len(comment.lstrip())  # spaces before the comment
            pad = " " * max(1, len(old) + lead - len(new)) if comment else ""  # same column
            lines[i] = f"{indent}{key}:{gap or ' '}{new}{pad}{comment.lstrip()}{newline}"
            return old
    lines.insert(start + 1, f"{indent}{key}: {_scalar(value)}\n")
    return None


def write_settings(path: Path, settings: dict[str, Any], validate) -> dict[str, tuple[Any, Any]]:
    """Write `settings` ({section.key: value}) into the params file at `path`, keeping its
    comments and other lines; `validate(mapping)` must accept the result first (it raises
    otherwise, and the file is left as it was). Returns {key: (old, new)} of the values
    that changed."""
    text = Path(path).read_text()
    lines = text.splitlines(keepends=True)
    before = load_yaml(text) or {}
    changed: dict[str, tuple[Any, Any]] = {}
    for dotted, value in settings.items():
        section, _, key = dotted.partition(".")
        old = (before.get(section) or {}).get(key)
        if old == value and key in (before.get(section) or {}):
            continue
        set_line(lines, dotted, value)
        changed[dotted] = (old, value)
    if not changed:
        return changed
    edited = "".join(lines)
    after = load_yaml(edited)
    for dotted, (_, value) in changed.items():
        section, _, key = dotted.partition(".")
        if after[section][key] != value:  # the edit must say what was meant
            raise ParamsError(f"could not write {dotted} = {value!r} into {path}")
    validate(after)
    with atomic_path(Path(path)) as tmp:
        Path(tmp).write_text(edited)
    return changed
