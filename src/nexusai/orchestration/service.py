"""The orchestration service's parts, wired once: memory client, embedder, settings, LLM."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from nexusai.embedders import Embedder
from nexusai.llm import OpenAIChat
from nexusai.orchestration.context import Context
from nexusai.orchestration.memory_client import MemoryClient
from nexusai.orchestration.settings import SettingsStore
from nexusai.orchestration.standing import warm_vectors
from nexusai.orchestration.turn import TurnRequest, run_turn
from nexusai.ranking.model import Ranker


@dataclass
class Orchestration:
    memory: MemoryClient
    embedder: Embedder
    settings: SettingsStore
    llm: OpenAIChat | None
    ranker: Ranker

    def warm(self, keep_on: Callable[[], bool]) -> None:
        """The standing memories' vectors, made ahead of the first turns while `keep_on()`."""
        warm_vectors(self.memory, self.embedder, keep_on)

    def context(
        self, request: TurnRequest, overrides: Mapping[str, object] | None = None
    ) -> Context:
        """The turn, under the settings read fresh (a PATCH takes effect on the very next
        turn); `overrides` change them for this turn only (validated like a PATCH, not
        saved)."""
        settings = self.settings.get().with_changes(overrides or {})
        return run_turn(self.memory, self.embedder, settings, request, self.ranker)
