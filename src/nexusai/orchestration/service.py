"""The orchestration service's parts, wired once: memory client, embedder, settings, LLM."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

from nexusai.embedders import Embedder
from nexusai.llm import OpenAIChat
from nexusai.models import EpisodeFilter, Scope
from nexusai.orchestration.context import Context, assemble_context
from nexusai.orchestration.memory_client import MemoryClient
from nexusai.orchestration.settings import SettingsStore
from nexusai.orchestration.standing import warm_vectors
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
        self,
        session_id: int,
        message: str,
        overrides: Mapping[str, object] | None = None,
        legs: bool = False,
        explain: bool = False,
        scope: Scope | None = None,
        rule: EpisodeFilter | None = None,
        now: datetime | None = None,
    ) -> Context:
        """Settings are read fresh, so a PATCH takes effect on the very next turn;
        `overrides` change them for this turn only (validated like a PATCH, not saved).
        `scope`: the session's, when a key's check read it already; `rule`: which
        episodes the turn may see; `now`: the turn's own time (a replayed chat's)."""
        settings = self.settings.get().with_changes(overrides or {})
        return assemble_context(
            self.memory,
            self.embedder,
            settings,
            session_id,
            message,
            legs=legs,
            explain=explain,
            ranker=self.ranker,
            scope=scope,
            rule=rule,
            now=now,
        )
