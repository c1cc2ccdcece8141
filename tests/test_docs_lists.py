"""Lists in the docs that mirror the code (datasets and their tasks, presets, commands,
registries) name exactly what the code has: each test fails when one of them drifts."""

from __future__ import annotations

import re

import pytest

from tests.conftest import ROOT


def table_rows(page: str, header: str) -> dict[str, str]:
    """The rows of the markdown table whose header row starts with `| header |`, keyed by
    the first cell without its backticks."""
    lines = (ROOT / page).read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {header} |"))
    rows = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        first = line.split("|")[1].strip()
        rows[re.sub(r"`|\s*\(default\)", "", first)] = line
    return rows


def quoted(text: str) -> set[str]:
    return set(re.findall(r"`([^`]+)`", text))


def test_the_dataset_table_names_every_dataset_and_its_tasks():
    from pucl.data.catalog import DATASETS

    rows = table_rows("docs/datasets.md", "dataset")
    assert set(rows) == set(DATASETS)
    for name, spec in DATASETS.items():
        tasks_cell = rows[name].split("|")[4]
        assert quoted(tasks_cell) == set(spec.tasks), name


def test_the_preset_table_names_every_preset_and_its_default():
    from pucl.params.presets import PRESETS
    from pucl.params.sweeps import load_sweep

    rows = table_rows("docs/datasets.md", "preset")
    files = {p.stem: p for p in (ROOT / PRESETS).glob("*.yaml")}
    assert set(rows) == set(files)
    for name, path in files.items():
        default_cell = rows[name].split("|")[4]
        assert f"`{load_sweep(path).default}`" in default_cell, name


def commands() -> set[str]:
    """Every `pucl` command, groups' subcommands as `data init`."""
    import typer

    from pucl.cli import app

    found = set()
    for name, command in typer.main.get_command(app).commands.items():
        if hasattr(command, "commands"):  # a group: `pucl data ...`
            found |= {f"{name} {sub}" for sub in command.commands}
        else:
            found.add(name)
    return found


def test_the_readme_tour_and_the_architecture_name_every_command():
    cells = " ".join(line.split("|")[1] for line in table_rows("README.md", "command").values())
    tour = {re.match(r"pucl ([a-z]+(?: (?:init|use|add|status|reestimate-prior))?)", cell).group(1)
            for cell in quoted(cells) if re.match(r"pucl [a-z]+", cell)}
    assert commands() <= tour, sorted(commands() - tour)
    line = next(line for line in (ROOT / "docs/architecture.md").read_text().splitlines()
                if line.startswith("| `pucl.cli` |"))
    assert quoted(line) - {"pucl.cli", "pucl"} == {c.split()[0] for c in commands()}


@pytest.mark.parametrize("registry", ["PRIOR_ESTIMATORS", "PRETRAINING_METHODS", "ENCODERS",
                                      "CONTRASTIVE_LOSSES", "PSEUDO_LABELLERS",
                                      "CLASSIFIER_OBJECTIVES"])
def test_the_registry_table_names_every_entry_and_its_settings(registry):
    import pucl
    from pucl.recipe.checks import registry_sections

    assert set(pucl._REGISTRIES) >= {registry}
    found = getattr(pucl, registry)
    row = next(line for line in table_rows("docs/architecture.md", "registry").values()
               if line.split("|")[1].strip().strip("`").endswith(f".{registry}"))
    cells = row.split("|")
    entries = {e.strip().removesuffix(" (default)") for e in cells[4].split(",")}
    assert entries == set(found.names())
    section = registry_sections()[found.kind]
    keys = {e.params_key for e in found.entries() if e.params_key}
    assert quoted(cells[3]) == {f"{section}.{k}" for k in keys}


def test_every_registry_has_a_row():
    import pucl

    rows = table_rows("docs/architecture.md", "registry")
    assert {r.rsplit(".", 1)[-1] for r in rows} == set(pucl._REGISTRIES)


def test_no_internal_issue_numbers_in_what_users_read():
    pages = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "reports").rglob("*.md"),
             *(ROOT / "params").rglob("*.yaml")]
    found = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in pages
             for m in re.finditer(r"(?i)\bissue #?\d+", p.read_text())]
    assert not found, found


def documented_commands() -> list[tuple[str, str]]:
    """(page, command) for every `pucl ...` line of a shell block in README.md and docs/
    (a trailing `# comment` and a leading VAR=value dropped; `\\` continuations joined)."""
    found = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        blocks = re.findall(r"```(?:bash|sh|shell|console)\n(.*?)```", page.read_text(),
                            flags=re.S)
        for block in blocks:
            for line in block.replace("\\\n", " ").splitlines():
                line = re.sub(r"\s+#.*$", "", line.strip()).removeprefix("$ ")
                line = re.sub(r"^(\w+=\S+\s+)+", "", line)
                if line.startswith("pucl "):
                    found.append((page.name, line.split(" && ")[0].split(" | ")[0]))
    return found


def parse_command(line: str) -> str | None:
    """None when pucl's CLI parses `line` (nothing runs), else why it refuses it. Typer
    carries its own copy of click, so commands and errors are told apart by behaviour."""
    import shlex

    import typer

    from pucl.cli import app

    root = typer.main.get_command(app)
    args, command, name = shlex.split(line)[1:], root, "pucl"
    try:
        while hasattr(command, "list_commands") and args and not args[0].startswith("-"):
            name, args = args[0], args[1:]
            command = command.get_command(root.context_class(root), name)
            if command is None:
                return f"no command {name!r}"
        command.make_context(name, list(args)).close()
    except Exception as exc:
        if type(exc).__name__ == "Exit":  # --help and the like
            return None
        if hasattr(exc, "format_message"):
            return exc.format_message()
        raise
    return None


def test_every_pucl_command_in_the_docs_is_one_the_cli_accepts():
    """Each documented command names a real command with options it has, parsed by the
    CLI itself (nothing runs); a renamed option or command fails here, not for a reader."""
    commands = documented_commands()
    assert len(commands) > 15  # the extraction finds the docs' commands
    # the parse refuses what it should
    assert "No such option: --rowz" in parse_command("pucl data init --rowz 5")
    assert parse_command("pucl datum init") == "no command 'datum'"
    refused = [f"{page}: {line}: {why}" for page, line in commands
               if (why := parse_command(line)) is not None]
    assert refused == []
