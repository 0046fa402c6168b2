"""One turn, end to end: its plan under the mode the `fusion` setting names, what `gather`
reads for it, and the context `assemble` makes of that."""

from __future__ import annotations

from nexusai.embedders import Embedder
from nexusai.orchestration.context import Context
from nexusai.orchestration.memory_client import MemoryClient
from nexusai.orchestration.modes import fusion_mode
from nexusai.orchestration.settings import RuntimeSettings
from nexusai.orchestration.turn.assemble import assemble
from nexusai.orchestration.turn.gather import gather
from nexusai.orchestration.turn.plan import TurnPlan, plan
from nexusai.orchestration.turn.request import TurnRequest
from nexusai.ranking.model import Ranker


def run_turn(
    memory: MemoryClient,
    embedder: Embedder,
    settings: RuntimeSettings,
    request: TurnRequest,
    ranker: Ranker | None = None,
) -> Context:
    """The turn these settings give (`ranker` the learned mode's, the shipped one when
    None)."""
    turn = plan(settings, request, fusion_mode(settings.fusion, ranker))
    return execute(turn, memory, embedder)


def execute(turn: TurnPlan, memory: MemoryClient, embedder: Embedder) -> Context:
    """The context the plan asks for: gathered, then assembled."""
    return assemble(turn, gather(turn, memory, embedder))
