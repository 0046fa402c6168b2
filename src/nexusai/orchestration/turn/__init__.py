"""One turn, for every face, `nexus eval` and ranker training: a `TurnRequest`, a pure
`plan` of it, `gather` (all the I/O) and a pure `assemble`.

    request --plan(settings, mode)--> TurnPlan --gather(memory, embedder)--> Gathered
    (TurnPlan, Gathered) --assemble--> Context

A new candidate source is one `Source` value in `sources.py`'s `SOURCES` (its `find` there
or in a module beside it); a new fusion mode is one class in `modes.py` and one line in
`MODES`. Each table's docstring says what a new entry must also touch.
"""

from nexusai.orchestration.turn.assemble import assemble
from nexusai.orchestration.turn.execute import execute, run_turn
from nexusai.orchestration.turn.gather import gather
from nexusai.orchestration.turn.gathered import Gathered
from nexusai.orchestration.turn.plan import TurnPlan, plan
from nexusai.orchestration.turn.request import TurnRequest

__all__ = [
    "Gathered",
    "TurnPlan",
    "TurnRequest",
    "assemble",
    "execute",
    "gather",
    "plan",
    "run_turn",
]
