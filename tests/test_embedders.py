from __future__ import annotations

import json
import math
from pathlib import Path

import httpx
import pytest

from nexusai.config import Config
from nexusai.embedders import EmbeddingError, create_embedder
from nexusai.embedders.minilm import LocalEmbedder
from nexusai.embedders.openai import OpenAIEmbedder
from nexusai.embedders.reference import SentenceTransformersEmbedder
from nexusai.errors import ConfigError


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_local_model_gives_unit_vectors_of_384(minilm: LocalEmbedder) -> None:
    [vector] = minilm.embed(["hello"])
    assert len(vector) == minilm.dimension == 384
    assert math.isclose(math.fsum(x * x for x in vector), 1.0, rel_tol=1e-4)


def test_local_model_finds_a_paraphrase(minilm: LocalEmbedder) -> None:
    texts = [
        "I adopted a puppy called Biscuit",
        "The quarterly report is due on Friday",
        "We should repaint the kitchen blue",
        "My sister moved to Lisbon last year",
    ]
    vectors = minilm.embed(texts)
    query = minilm.embed_one("what is my dog's name?")
    best = max(range(len(texts)), key=lambda i: cosine(query, vectors[i]))
    assert texts[best] == "I adopted a puppy called Biscuit"


def locomo_turns(data: Path, count: int) -> list[str]:
    path = data / "locomo" / "locomo10.json"
    conversation = json.loads(path.read_text())[0]["conversation"]
    turns = [
        t["text"]
        for key, value in conversation.items()
        if key.startswith("session_") and isinstance(value, list)
        for t in value
    ]
    return turns[:count]


def test_onnx_vectors_match_sentence_transformers_on_real_turns(
    minilm: LocalEmbedder, dev_data: Path
) -> None:
    """The reference implementation, on real conversation turns of all lengths."""
    texts = locomo_turns(dev_data, 300)
    reference = SentenceTransformersEmbedder().embed(texts)
    ours = minilm.embed(texts)
    assert min(cosine(a, b) for a, b in zip(ours, reference, strict=True)) > 0.9999

    def top(vectors: list[list[float]], probe: int) -> list[int]:
        return sorted(range(len(texts)), key=lambda i: -cosine(vectors[probe], vectors[i]))[:10]

    for probe in range(0, 300, 30):
        assert top(ours, probe) == top(reference, probe)


@pytest.mark.model
@pytest.mark.slow
def test_mpnet_vectors_match_sentence_transformers_on_real_turns(dev_data: Path) -> None:
    """all-mpnet-base-v2 from its PyPI parts, through our graph (relative attention
    buckets, positions from 2), against sentence-transformers reading the same folder. The
    unpacked folder and the graph are cached where MiniLM's export is, as in use."""
    from sentence_transformers import SentenceTransformer

    from nexusai.embedders.minilm import default_cache_dir
    from nexusai.embedders.mpnet import MPNetEmbedder, unpacked

    embedder = MPNetEmbedder()
    model = SentenceTransformer(str(unpacked(default_cache_dir())), device="cpu")
    # Each batch pads to its longest text: the one cut at 384 tokens goes alone.
    for texts in ([*locomo_turns(dev_data, 24), "x"], ["a very long turn " * 120]):
        ours = embedder.embed(texts)
        reference = model.encode(texts, normalize_embeddings=True).tolist()
        assert len(ours[0]) == 768
        assert min(cosine(a, b) for a, b in zip(ours, reference, strict=True)) > 0.9999


def test_the_embedder_behind_the_requests_makes_the_same_vectors(minilm: LocalEmbedder) -> None:
    """What the background indexes with is one thread of the same model: its vectors are
    the ones a write makes, so an episode indexed either way is found the same."""
    behind = minilm.behind()
    assert behind is not minilm
    assert behind is minilm.behind()
    assert (behind.name, behind.dimension) == (minilm.name, minilm.dimension)
    texts = ["I adopted a puppy called Biscuit", "word " * 400, "我们住在北京"]
    for ours, theirs in zip(behind.embed(texts), minilm.embed(texts), strict=True):
        assert cosine(ours, theirs) > 0.99999


def test_long_text_is_truncated_not_rejected(minilm: LocalEmbedder) -> None:
    [vector] = minilm.embed(["word " * 5000])
    assert len(vector) == 384


def test_batching_splits_and_keeps_order(minilm: LocalEmbedder) -> None:
    # Lengths that rise and fall, so that batching by length reorders them.
    texts = [f"sentence number {i}" + " and more" * (i % 7) for i in range(150)]
    together = minilm.embed(texts)
    assert len(together) == 150
    for i in (0, 6, 99, 149):
        assert cosine(together[i], minilm.embed_one(texts[i])) > 0.9999


def fake_openai(handler_log: list[dict[str, object]], fail_first: int = 0, status: int = 500):
    attempts = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        attempts["n"] += 1
        if attempts["n"] <= fail_first:
            return httpx.Response(status, json={"error": "busy"})
        body = json.loads(request.content)
        handler_log.append({"body": body, "auth": request.headers.get("authorization")})
        data = [
            {"index": i, "embedding": [float(len(text)), 1.0, 0.0]}
            for i, text in reversed(list(enumerate(body["input"])))
        ]
        return httpx.Response(200, json={"data": data, "model": body["model"]})

    return httpx.MockTransport(handler)


def test_openai_embedder_batches_orders_and_normalizes() -> None:
    log: list[dict[str, object]] = []
    embedder = OpenAIEmbedder(
        "http://embed.test/v1", "nomic", "secret", dimension=3, transport=fake_openai(log)
    )
    embedder.batch_size = 2
    vectors = embedder.embed(["a", "bbb", "cc"])
    assert [len(v) for v in vectors] == [3, 3, 3]
    assert vectors[1][0] > vectors[2][0] > vectors[0][0]  # order kept despite reversed data
    assert math.isclose(math.fsum(x * x for x in vectors[1]), 1.0)
    # Batched by length, shortest first; the vectors still come back in the texts' order.
    assert [entry["body"]["input"] for entry in log] == [["a", "cc"], ["bbb"]]  # type: ignore[index]
    assert log[0]["auth"] == "Bearer secret"
    assert embedder.name == "openai:nomic"


def test_openai_embedder_probes_dimension() -> None:
    embedder = OpenAIEmbedder("http://embed.test/v1", "m", transport=fake_openai([]))
    assert embedder.dimension == 3


def test_openai_embedder_retries_server_errors() -> None:
    embedder = OpenAIEmbedder(
        "http://e.test", "m", dimension=3, transport=fake_openai([], fail_first=2)
    )
    assert len(embedder.embed_one("x")) == 3


def test_openai_embedder_gives_up_after_bounded_retries() -> None:
    embedder = OpenAIEmbedder(
        "http://e.test", "m", dimension=3, transport=fake_openai([], fail_first=99)
    )
    with pytest.raises(EmbeddingError, match="3 times"):
        embedder.embed_one("x")


def test_openai_embedder_does_not_retry_a_refusal() -> None:
    embedder = OpenAIEmbedder(
        "http://e.test", "m", dimension=3, transport=fake_openai([], fail_first=1, status=401)
    )
    with pytest.raises(EmbeddingError, match="401"):
        embedder.embed_one("x")


def test_unknown_embedder_and_missing_url_fail_loudly() -> None:
    with pytest.raises(ConfigError, match="local, mpnet, openai"):
        create_embedder(Config.from_env({"NEXUS_EMBEDDER": "word2vec"}))
    with pytest.raises(ConfigError, match="NEXUS_EMBEDDER_BASE_URL"):
        create_embedder(Config.from_env({"NEXUS_EMBEDDER": "openai"}))


def fp16_safetensors(source: Path) -> bytes:
    """How the shipped weights were made from the package's: every tensor the encoder uses,
    cast to float16, in name order (see THIRD_PARTY.md)."""
    import struct

    import numpy as np

    from nexusai.embedders.minilm import read_safetensors

    tensors = {
        name: value
        for name, value in read_safetensors(source).items()
        if name.startswith(("embeddings.", "encoder.")) and name != "embeddings.position_ids"
    }
    header, chunks, at = {}, [], 0
    for name in sorted(tensors):
        data = np.ascontiguousarray(tensors[name], dtype="<f2").tobytes()
        shape = list(tensors[name].shape)
        header[name] = {"dtype": "F16", "shape": shape, "data_offsets": [at, at + len(data)]}
        chunks.append(data)
        at += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(chunks)


def test_shipped_weights_are_the_packaged_model_cast_to_fp16() -> None:
    from nexusai.embedders.minilm import TOKENIZER, WEIGHTS, reference_model_dir

    source = reference_model_dir()
    assert WEIGHTS.read_bytes() == fp16_safetensors(source / "model.safetensors")
    assert TOKENIZER.read_bytes() == (source / "tokenizer.json").read_bytes()


@pytest.mark.model
def test_the_default_embedder_needs_no_torch(tmp_path: Path) -> None:
    """The serving path builds its graph from the shipped weights with torch unimportable."""
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['torch'] = None; sys.modules['transformers'] = None\n"
        "from pathlib import Path\n"
        "from nexusai.embedders.minilm import LocalEmbedder\n"
        f"print(len(LocalEmbedder(Path({str(tmp_path)!r})).embed_one('hello')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "384", done.stderr
