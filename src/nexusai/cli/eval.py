"""`nexus eval`: retrieval quality on labelled chats (LoCoMo, BEAM, your own JSONL)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from nexusai.cli.common import F, clean_errors, require_extra
from nexusai.errors import InvalidInput

if TYPE_CHECKING:
    from nexusai.evaluation.datasets import EvalSet
    from nexusai.evaluation.options import EvalOptions


@click.group(name="eval")
def eval_group() -> None:
    """Measure retrieval quality on a benchmark."""


def eval_options(fn: F) -> F:
    """The options every `nexus eval` command shares."""
    for option in reversed(
        [
            click.option(
                "--k",
                "ks",
                default="5,10,20",
                show_default=True,
                callback=_cutoffs,
                help="Cut-offs for recall/hit: whole numbers from 1 to 1000, comma-separated",
            ),
            click.option(
                "--json",
                "json_out",
                type=click.Path(path_type=Path),
                default=None,
                help="Write every figure, and the recommended settings, to this file",
            ),
            click.option(
                "--plot",
                "plot_out",
                type=click.Path(path_type=Path),
                default=None,
                help="Draw recall against keywordWeight to this PNG (needs nexusai[plot])",
            ),
            click.option(
                "--depth",
                type=click.IntRange(1, 100),
                default=None,
                help="Score the top k of one turn at this semanticLimit (default: each k is a"
                " turn at semanticLimit k)",
            ),
            click.option(
                "--keyword-budget",
                type=click.IntRange(0, 10_000_000),
                default=0,
                show_default=True,
                help="The keywordBudget setting for every turn (0: every word, the spec's query)",
            ),
            click.option(
                "--time-aware",
                type=click.Choice(["off", "filter"]),
                default="off",
                show_default=True,
                help="The timeAware setting for every turn; a question is asked at its"
                " conversation's last message's time",
            ),
            click.option(
                "--turns-per-episode",
                type=click.IntRange(1, 50),
                default=1,
                show_default=True,
                help="Store every N messages as one episode (long episodes)",
            ),
            fresh_vectors_option,
        ]
    ):
        fn = option(fn)
    return clean_errors(fn)


fresh_vectors_option = click.option(
    "--fresh-vectors",
    is_flag=True,
    default=False,
    help="Embed every text again, not reading the vectors earlier runs kept (in"
    " ~/.cache/nexusai/eval-vectors, or beside NEXUS_MODEL_CACHE_DIR's models)",
)


def _cutoffs(_: click.Context, param: click.Parameter, raw: str) -> list[int]:
    parts = [part.strip() for part in raw.split(",") if part.strip()]
    if not parts:
        raise click.BadParameter("give at least one cut-off, such as 5,10,20", param=param)
    bad = next(
        (p for p in parts if not (p.isascii() and p.isdigit() and 1 <= int(p) <= 1000)), None
    )
    if bad is not None:
        raise click.BadParameter(f"{bad!r} is not a whole number from 1 to 1000", param=param)
    return sorted({int(part) for part in parts})


def _options(
    ks: list[int],
    json_out: Path | None,
    plot_out: Path | None,
    depth: int | None,
    turns_per_episode: int,
    keyword_budget: int,
    time_aware: str,
    fresh_vectors: bool,
) -> EvalOptions:
    from nexusai.evaluation.options import EvalOptions

    if plot_out is not None:
        require_extra("matplotlib", "plot", "--plot")
    return EvalOptions(
        ks,
        depth,
        turns_per_episode,
        json_out,
        plot_out,
        keyword_budget=keyword_budget,
        time_aware=time_aware,
        kept_vectors=not fresh_vectors,
    )


def _chosen(raw: str | None) -> list[str] | None:
    return [c.strip() for c in raw.split(",") if c.strip()] if raw else None


@eval_group.command(name="locomo")
@click.option(
    "--data",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    required=True,
    help="LoCoMo's locomo10.json",
)
@click.option("--conversations", default=None, help="e.g. conv-26,conv-30 (default: all)")
@eval_options
def eval_locomo(data: Path, conversations: str | None, **common: Any) -> None:
    """LoCoMo (human-human chats): evidence recall@k, hit@k and MRR per weight pair."""
    from nexusai.evaluation.datasets import load_locomo
    from nexusai.evaluation.report import run_eval

    run_eval([load_locomo(data, _chosen(conversations))], _options(**common))


@eval_group.command(name="beam")
@click.option(
    "--data",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    required=True,
    help="A folder of BEAM chats (one folder each)",
)
@click.option("--chats", default=None, help="e.g. 1,2,3 (default: every chat folder)")
@eval_options
def eval_beam(data: Path, chats: str | None, **common: Any) -> None:
    """BEAM (long user-assistant chats): the same scores, per probing-question type."""
    from nexusai.evaluation.datasets import load_beam
    from nexusai.evaluation.report import run_eval

    run_eval([load_beam(data, _chosen(chats))], _options(**common))


@eval_group.command(name="jsonl")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@eval_options
def eval_jsonl(file: Path, **common: Any) -> None:
    """Your own labelled chats, from a JSONL file of two kinds of line:

    \b
    {"conversation": "c1", "session": "s1", "id": "t1", "speaker": "user",
     "content": "I moved to Lisbon", "occurredAt": "2024-05-01T10:00:00Z"}
    {"conversation": "c1", "question": "Where do I live?", "evidence": ["t1"]}

    Turns carry an id; questions name the ids of the turns that answer them.
    """
    from nexusai.evaluation.datasets import load_jsonl
    from nexusai.evaluation.report import run_eval

    run_eval([load_jsonl(file)], _options(**common))


def dataset_options(fn: F) -> F:
    """--locomo, --beam and --jsonl: the labelled sets `eval all` and `ranker train` read."""
    for option in reversed(
        [
            click.option(
                "--locomo",
                type=click.Path(exists=True, dir_okay=False, path_type=Path),
                default=None,
                help="LoCoMo's locomo10.json",
            ),
            click.option(
                "--beam",
                "beam_folders",
                multiple=True,
                type=click.Path(exists=True, file_okay=False, path_type=Path),
                help="A folder of BEAM chats, a set named by the folder (beam, beam500k);"
                " may be given again",
            ),
            click.option(
                "--jsonl",
                "jsonl_files",
                multiple=True,
                type=click.Path(exists=True, dir_okay=False, path_type=Path),
                help="Your own labelled chats (see `nexus eval jsonl --help`); may be given again",
            ),
        ]
    ):
        fn = option(fn)
    return fn


def load_sets(
    locomo: Path | None, beam_folders: tuple[Path, ...], jsonl_files: tuple[Path, ...]
) -> list[EvalSet]:
    """The sets the options name, in that order; InvalidInput when none is given, or when
    two have one name (a fold is a set's name and a conversation's)."""
    from nexusai.evaluation.datasets import load_beam, load_jsonl, load_locomo

    if not (locomo or beam_folders or jsonl_files):
        raise InvalidInput("say which datasets to use: --locomo FILE, --beam DIR, --jsonl FILE")
    sets = [load_locomo(locomo)] if locomo else []
    sets += [load_beam(folder) for folder in beam_folders]
    sets += [load_jsonl(f) for f in jsonl_files]
    names = [s.name for s in sets]
    if twice := sorted({n for n in names if names.count(n) > 1}):
        raise InvalidInput(
            f"two datasets are named {twice[0]}: a BEAM set is named by its folder, so give"
            " folders of different names"
        )
    return sets


@eval_group.command(name="all")
@dataset_options
@eval_options
def eval_all(
    locomo: Path | None,
    beam_folders: tuple[Path, ...],
    jsonl_files: tuple[Path, ...],
    **common: Any,
) -> None:
    """Every dataset given, a table each, and the worst case of each weight pair across them."""
    from nexusai.evaluation.report import run_eval

    run_eval(load_sets(locomo, beam_folders, jsonl_files), _options(**common))
