"""The eval's kept vectors: a text's vector is made once per embedder and read back to the
bit; a query and a passage of one text are kept apart."""

from __future__ import annotations

from pathlib import Path

from nexusai.evaluation.vectors import KeptVectors
from tests.conftest import SwitchableEmbedder


def test_a_kept_vector_is_the_one_made_and_is_made_once(
    tmp_path: Path, embedder: SwitchableEmbedder
) -> None:
    texts = ["the kayak trip", "a recipe for lentil soup", "the kayak trip"]
    kept = KeptVectors(embedder, tmp_path)
    made = kept.embed(texts)
    assert made == embedder.inner.embed(texts)
    calls = embedder.calls
    again = KeptVectors(embedder, tmp_path)  # another run: read from the file
    assert again.embed(list(reversed(texts))) == list(reversed(made))
    assert embedder.calls == calls
    assert again.embed_query("the kayak trip") == embedder.inner.embed_query("the kayak trip")
    assert again.name == embedder.name
    assert again.dimension == embedder.dimension
    kept.close()
    again.close()
