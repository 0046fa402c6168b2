"""The docs stay true: every module ARCHITECTURE.md names exists, and every command,
option and NEXUS_ variable is in the generated reference."""

from __future__ import annotations

import re
from pathlib import Path

import click

from nexusai.cli import cli
from nexusai.config import reference

ROOT = Path(__file__).parents[1]
SRC = ROOT / "src" / "nexusai"


def _named_modules() -> set[str]:
    """Every module path ARCHITECTURE.md names, as `package/module.py` under nexusai."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    packages = "|".join(p.name for p in SRC.iterdir() if p.is_dir() and p.name != "__pycache__")
    found = re.findall(rf"`((?:nexusai|{packages})/[\w/]+\.py)`", text)
    return {name.removeprefix("nexusai/") for name in found}


def test_every_module_the_architecture_names_exists() -> None:
    named = _named_modules()
    assert len(named) > 30
    assert sorted(name for name in named if not (SRC / name).exists()) == []


def test_the_architecture_names_every_module() -> None:
    """A module that exists is on the page (packages' `__init__.py` and `__main__.py`
    say nothing of their own)."""
    modules = {
        str(path.relative_to(SRC))
        for path in SRC.rglob("*.py")
        if path.name not in ("__init__.py", "__main__.py")
    }
    assert sorted(modules - _named_modules()) == []


def test_the_turn_diagram_names_what_the_code_has() -> None:
    """Each `module.py   name` line of ARCHITECTURE.md's turn diagram names a function or
    class (or a class's method, `Class.method`) that module has."""
    import importlib

    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    diagram = text.split("## One `/context` turn", 1)[1].split("```")[1]
    steps = re.findall(r"^\s*((?:\w+/)+\w+)\.py\s+([A-Za-z_][\w.]*)", diagram, re.M)
    assert len(steps) >= 10
    missing = []
    for path, name in steps:
        found: object = importlib.import_module("nexusai." + path.replace("/", "."))
        for part in name.split("."):
            found = getattr(found, part, None)
        if found is None:
            missing.append(f"{path}.py {name}")
    assert missing == []


def test_every_command_option_and_setting_is_in_the_reference() -> None:
    cli_doc = (ROOT / "docs" / "cli.md").read_text()
    config_doc = (ROOT / "docs" / "configuration.md").read_text()

    def walk(command: click.Command, path: list[str]) -> list[tuple[list[str], click.Command]]:
        found = [(path, command)]
        if isinstance(command, click.Group):
            for name, inner in command.commands.items():
                found += walk(inner, [*path, name])
        return found

    for path, command in walk(cli, ["nexus"])[1:]:
        assert f"## {' '.join(path)}\n" in cli_doc, path
        for option in command.params:
            if isinstance(option, click.Option):
                assert option.opts[-1] in cli_doc, (path, option.opts)
    for name, _, _ in reference():
        assert f"`{name}`" in config_doc, name


def test_every_relative_link_and_image_resolves() -> None:
    """A link or image in README.md or docs/ that names a file of this repository points at
    one that exists, relative to the page (as GitHub reads it)."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue  # a URL, or an anchor of the page itself
            path = (page.parent / target.split("#")[0]).resolve()
            if not path.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert broken == []
