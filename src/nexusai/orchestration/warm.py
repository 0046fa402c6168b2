"""Turns a start asks of itself before `/ready` answers, through the path a `/context`
turn takes (the turn, then its shaping into the response): the first turns a process
serves pay for what nothing ran yet (the model's first runs at each length of message,
the ranker's, the code a turn runs once and the reads of the store's newest pages): at
100,000 episodes the first ten after `/ready` had a p95 1.26 to 1.33 times the warm one
without these, 0.97 to 1.13 with them (docs/benchmarks.md). Read-only: a context turn
stores nothing."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from nexusai.orchestration.api import context_out
from nexusai.orchestration.service import Orchestration
from nexusai.orchestration.turn import TurnRequest

WARM_TURNS = 12  # the newest messages asked: a few lengths of message, each step twice
WARM_CHARS = 2000  # each cut to a message's usual length: a long reply is not a question
# The settings the first turns are likely asked at: the ones saved, and the recommended
# (a ranked, packed turn runs code the spec's turn never does).
WARM_SETTINGS: tuple[Mapping[str, object], ...] = (
    {},
    {"fusion": "learned", "contextBudget": 1000, "memoryOrder": "auto"},
)

SessionMessage = tuple[int, str]  # a session, and a message asked in it


def warm_turns(
    orchestration: Orchestration, asked: Sequence[SessionMessage], keep_on: Callable[[], bool]
) -> None:
    """Each of `asked` as a turn at each of the warm settings, with and without `explain`,
    while `keep_on()`: what they return is thrown away."""
    for index, (session_id, message) in enumerate(asked):
        for overrides in WARM_SETTINGS:
            if not keep_on():
                return
            explain = index % 2 == 1
            context = orchestration.context(
                TurnRequest(session_id, message, explain=explain), overrides
            )
            context_out(context, explain).model_dump_json(by_alias=True, exclude_unset=True)
