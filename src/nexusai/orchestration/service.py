"""The orchestration service's parts, wired once: memory client, embedder, settings, LLM."""

from __future__ import annotations

from dataclasses import dataclass

from nexusai.embedders import Embedder
from nexusai.llm import OpenAIChat
from nexusai.orchestration.context import Context, assemble_context
from nexusai.orchestration.memory_client import MemoryClient
from nexusai.orchestration.settings import SettingsStore


@dataclass
class Orchestration:
    memory: MemoryClient
    embedder: Embedder
    settings: SettingsStore
    llm: OpenAIChat | None

    def context(self, session_id: int, message: str) -> Context:
        """Settings are read fresh, so a PATCH takes effect on the very next turn."""
        return assemble_context(
            self.memory,
            self.embedder,
            self.settings.get(),
            session_id,
            message,
        )
