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


def test_every_module_the_architecture_names_exists() -> None:
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    named = set(
        re.findall(
            r"`((?:nexusai|memory|orchestration|embedders|cli|mcp|inspector|evaluation)/[\w/]+\.py)`",
            text,
        )
    )
    assert len(named) > 30
    missing = []
    for name in named:
        path = SRC / name.removeprefix("nexusai/")
        if not path.exists():
            missing.append(name)
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
