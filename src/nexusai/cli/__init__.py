"""The `nexus` command: thin wrappers over the library that turn domain errors into clean
messages. `data` holds the commands on the data directory, `remote` those that speak to a
running service over HTTP, `eval` the evaluation, `ranker` the learned ranker's training,
`mcp` the MCP server over stdio."""

from __future__ import annotations

import click

from nexusai.cli import data, remote
from nexusai.cli.eval import eval_group
from nexusai.cli.mcp import mcp
from nexusai.cli.ranker import ranker_group


@click.group()
@click.version_option(package_name="nexusai")
def cli() -> None:
    """nexusai: long-term memory for chat assistants."""


for command in (
    data.serve,
    data.reindex,
    data.doctor,
    data.backup,
    data.restore,
    data.migrate,
    data.keys,
    data.import_command,
    data.export_command,
    eval_group,
    ranker_group,
    mcp,
    remote.settings,
    remote.context,
    remote.chat,
    remote.entities,
    remote.projects,
    remote.sessions,
    remote.add,
    remote.pin,
    remote.forget,
):
    cli.add_command(command)


def main() -> None:
    cli(prog_name="nexus")
