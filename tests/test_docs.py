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
