"""Embedders turn text into vectors: the contract (`base`), one module per provider
(`minilm`, the default; `e5`; `openai`; `reference`, the torch path tests compare with),
and the one list of them by name (`registry`, keyed by `NEXUS_EMBEDDER`)."""

from nexusai.embedders.base import Embedder, EmbeddingError, Vector
from nexusai.embedders.registry import EMBEDDERS, create_embedder

__all__ = ["EMBEDDERS", "Embedder", "EmbeddingError", "Vector", "create_embedder"]
