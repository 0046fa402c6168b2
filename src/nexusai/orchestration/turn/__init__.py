"""One turn, for every face, `nexus eval` and ranker training: a `TurnRequest`, a pure
`plan` of it under the settings and fusion mode, and the one `execute` that runs it.

    request --plan(settings, mode)--> TurnPlan --execute(memory, embedder)--> Context

A new candidate source is one module beside `sources.py`'s and one line in `SOURCES`.
"""

from nexusai.orchestration.turn.execute import execute, run_turn
from nexusai.orchestration.turn.plan import TurnPlan, plan
from nexusai.orchestration.turn.request import TurnRequest

__all__ = ["TurnPlan", "TurnRequest", "execute", "plan", "run_turn"]
