"""The embedder contract: one abstract method; batching lives in the base class."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from nexusai.errors import NexusError

Vector = list[float]


class EmbeddingError(NexusError):
    """The embedder could not produce vectors; callers keep the text and retry later."""

    status_code = 503


class Embedder(ABC):
    """Capabilities: `name` identifies the vectors it makes (stored with them), `dimension`
    their size, `batch_size` how many texts one `embed_batch` call takes, `window_chars` how
    much text one vector covers (a longer episode gets one vector per window)."""

    name: str
    dimension: int
    batch_size: int = 32
    # MiniLM reads 256 tokens: ~700 characters of prose or code, plus the 300 characters of
    # the turn before that the first window carries.
    window_chars: int = 700

    @abstractmethod
    def embed_batch(self, texts: Sequence[str]) -> list[Vector]:
        """Vectors for at most `batch_size` texts, in order, unit length."""

    def embed(self, texts: Sequence[str]) -> list[Vector]:
        """Vectors for any number of texts, in order. The texts are batched by length: a
        batch is padded to its longest text, so batches of like lengths spend less of the
        model's time on padding (a quarter fewer tokens on short chat turns)."""
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        vectors: list[Vector] = [[] for _ in texts]
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            for i, vector in zip(batch, self.embed_batch([texts[i] for i in batch]), strict=True):
                vectors[i] = vector
        return vectors

    def embed_one(self, text: str) -> Vector:
        return self.embed_batch([text])[0]

    def behind(self) -> Embedder:
        """The embedder for work behind the requests (episodes a forget left waiting): the
        same vectors, made so as to leave the requests a core where it can. This one."""
        return self

    def embed_query(self, text: str) -> Vector:
        """A search query's vector. The same as a passage's for symmetric models; models
        trained with an instruction (e5's "query: ") override it."""
        return self.embed_one(text)
