"""The orchestration service's parts, wired once: memory client, embedder, settings, LLM."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from nexusai.embedders import Embedder
from nexusai.llm import OpenAIChat
from nexusai.orchestration.context import Context
from nexusai.orchestration.layout import memory_block
from nexusai.orchestration.memory_client import MemoryClient
from nexusai.orchestration.settings import SettingsStore
from nexusai.orchestration.standing_vectors import warm_vectors
from nexusai.orchestration.turn import TurnRequest, run_turn
from nexusai.ranking.model import Ranker
from nexusai.tokens import count_tokens


@dataclass
class Orchestration:
    memory: MemoryClient
    embedder: Embedder
    settings: SettingsStore
    llm: OpenAIChat | None
    ranker: Ranker
    llm_context_tokens: int = 8192  # NEXUS_LLM_CONTEXT_TOKENS: a chat turn's memories, half

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

    def chat_context(
        self, request: TurnRequest, overrides: Mapping[str, object] | None = None
    ) -> Context:
        """A chat turn's context (`/chat`, `/v1`): the turn's own, unless its memories
        would take more than half the LLM's context window; then the same turn packed into
        that half (long memories as their passage), saying so. A 420 KB message sent whole
        would not reach the model at all."""
        context = self.context(request, overrides)
        cap = self.llm_context_tokens // 2
        if 0 < context.budget <= cap:
            return context  # packed already within the cap: nothing to count
        given = count_tokens(memory_block(context))  # a spec turn's lines are not priced
        if given <= cap:
            return context
        capped = self.context(request, {**(overrides or {}), "contextBudget": cap})
        said = (
            f"the memories would take {given} tokens, more than half the LLM's context window"
            f" (NEXUS_LLM_CONTEXT_TOKENS {self.llm_context_tokens}): they were packed into"
            f" {cap} tokens, long ones as their passage"
        )
        return replace(capped, warnings=[*capped.warnings, said])
