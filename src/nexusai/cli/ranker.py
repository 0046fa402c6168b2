"""`nexus ranker`: train the learned ranker (`fusion: "learned"`) on labelled chats."""

from __future__ import annotations

from pathlib import Path

import click

from nexusai.cli.common import clean_errors, require_extra
from nexusai.cli.eval import dataset_options, load_sets
from nexusai.config import RETRIEVAL


@click.group(name="ranker")
def ranker_group() -> None:
    """The learned ranker: train one on your labelled chats."""


@ranker_group.command(name="train")
@dataset_options
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("ranker.json"),
    show_default=True,
    help="Where to write the model file (point NEXUS_RANKER at it)",
)
@click.option(
    "--depth",
    type=click.IntRange(5, 100),
    default=RETRIEVAL.POOL_DEPTH,
    show_default=True,
    help="Candidates asked of each leg per turn",
)
@clean_errors
def train_command(
    locomo: Path | None,
    beam_folders: tuple[Path, ...],
    jsonl_files: tuple[Path, ...],
    out: Path,
    depth: int,
) -> None:
    """Train a ranker on labelled chats and write it to --out.

    Every question is asked as a learned turn asks (both legs, --depth deep), and the
    table printed is leave-one-conversation-out: each conversation is scored by a ranker
    fitted to all the others, beside RRF's weight pairs on the same lists. The file
    written is then fitted to every conversation. Needs `pip install 'nexusai[train]'`.
    """
    require_extra("lightgbm", "train", "nexus ranker train")
    from nexusai.evaluation.training import train

    train(load_sets(locomo, beam_folders, jsonl_files), out, depth)


@ranker_group.command(name="select")
@dataset_options
@clean_errors
def select_command(
    locomo: Path | None, beam_folders: tuple[Path, ...], jsonl_files: tuple[Path, ...]
) -> None:
    """Compare ways of fitting the ranker, out of fold, within token budgets.

    Each way (the shipped one; without features that may not carry to other chats;
    stronger or weaker regularisation; fewer or more rounds) is fitted
    leave-one-conversation-out over every set given, and every question is asked as a
    budgeted learned turn by the ranker that never saw its conversation. Prints recall
    within 500, 1,000 and 2,000 tokens per set, each way's mean over the sets (each
    weighed alike) and its worst set. Needs `pip install 'nexusai[train]'`.
    """
    require_extra("lightgbm", "train", "nexus ranker select")
    from nexusai.evaluation.selection import select

    select(load_sets(locomo, beam_folders, jsonl_files))
