"""Any OpenAI-compatible `/v1/embeddings` endpoint as an embedder."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import httpx

from nexusai.embedders.base import Embedder, EmbeddingError, Vector
from nexusai.httpclient import bearer_client

log = logging.getLogger("nexusai.embedders")


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
