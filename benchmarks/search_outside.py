"""Programs outside the benchmark set, optimised from scratch as a new user would: default
options (the search space derived from each program), ``--budget`` seconds (default 300) on this
CPU, then a check that the best accepted μGraph is no worse than the input by the cost model.

Programs (fp16 unless named bf16):

- ``scaled_attention``: softmax(0.125 · Q·K) · V (a scale before exp), Q (2, 256, 64).
- ``softcap_attention``: softmax(50 · tanh(0.0025 · Q·K)) · V, soft-capped logits at mha's
  shape, Q (32, 16, 64).
- ``layernorm_matmul``: ((x − mean x) / sqrt(mean((x − mean x)²))) · W — mean subtraction, sub,
  square, sqrt, div before a matmul; X (8, 1024), W (1024, 2048).
- ``norm_gain_matmul``: rms_norm(X, G) · W — a norm with a gain (three kernel inputs).
- ``swish_matmul``: (x · sigmoid(x)) · W.
- ``sigmoid_gated_mlp``: sigmoid(X·W1) ⊙ (X·W2); ``gelu_gated_mlp``: gelu(X·W1) ⊙ (X·W2).
- ``exp_bmm``: exp(A·B)·C, batched matmuls with an exp between them.
- ``sum_matmul``: (X + Y) · W, an elementwise op of two activations before a matmul.
- ``gated_down``: (silu(X) ⊙ Y) · W, an MLP's gated down projection.
- ``prefill_matmul``, ``prefill_bias_gelu``, ``prefill_attention``, ``grouped_matmul``,
  ``prefill_gated_mlp``, ``wide_rmsnorm``: 128- to 512-row products (one batched) and 4096-row
  norms, where the other programs have at most 32 rows.
- ``rmsnorm_bf16``, ``gated_mlp_bf16``, ``prefill_matmul_bf16``: three of the above in bf16.
- ``rmsnorm_f32``, ``gated_mlp_f32``, ``prefill_matmul_f32``: rmsnorm, the gated MLP and
  prefill_matmul in fp32.
- ``decode_gated_mlp``: Llama-7B's gated MLP on activations (8, 1, 4096), batch dimensions
  and 2-D weights as PyTorch's linear layers have them.

    PYTHONPATH=. python3 benchmarks/search_outside.py [--budget 300] [--workers 2] [--programs ...]

Writes benchmarks/results/search_outside.{json,md} (or --out PREFIX) and each program's accepted
μGraphs under PREFIX_ugraphs/<name>/. Each row runs ``mirage_formal.superoptimize`` exactly as
``mirage-formal optimize`` does (Z3 oracle, float64 screen + prime-field verifier to 2^-64,
float64 re-check), with no GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from search_common import machine

import mirage_formal as mf
from mirage_formal.ir.graph import KernelGraph
from mirage_formal.optimize import superoptimize
from mirage_formal.search import estimate


def _scaled_attention(heads: int, rows: int, d: int, kv: int, dv: int) -> KernelGraph:
    """softmax(Q·K · 0.125) · V without max subtraction, K stored transposed."""
    g = mf.Graph()
    q = g.input((heads, rows, d), "f16", "Q")
    k = g.input((heads, d, kv), "f16", "K")
    v = g.input((heads, kv, dv), "f16", "V")
    e = g.exp(g.mul_scalar(g.matmul(q, k), scalar=0.125))
    g.output(g.matmul(g.div(e, g.sum(e, axis=-1, keepdims=True)), v))
    return g.build()


def scaled_attention(b: int = 1) -> KernelGraph:
    return _scaled_attention(2 * b, 256, 64, 4096, 64)


def softcap_attention(b: int = 1) -> KernelGraph:
    """softmax(50 · tanh(0.0025 · Q·K)) · V: attention with its logits soft-capped at 50 (a
    1/8 scale inside), 32b heads of 16 queries over 4096 keys (mha's shape). The fused kernel
    has 13 block ops; the enumeration does not reach it within minutes, a loop seed does at
    once (forty-second session, ``search/loop_seeds.py``)."""
    g = mf.Graph()
    q = g.input((32 * b, 16, 64), "f16", "Q")
    k = g.input((32 * b, 64, 4096), "f16", "K")
    v = g.input((32 * b, 4096, 64), "f16", "V")
    s = g.mul_scalar(g.tanh(g.mul_scalar(g.matmul(q, k), scalar=0.0025)), scalar=50.0)
    e = g.exp(s)
    g.output(g.matmul(g.div(e, g.sum(e, axis=-1, keepdims=True)), v))
    return g.build()


def decode_gated_mlp(b: int = 1) -> KernelGraph:
    """(silu(X·Wg) ⊙ (X·Wu)) · Wd as PyTorch writes it at decode shapes: activations (8b, 1,
    4096) (a batch of one-token sequences) against 2-D weights of Llama-7B's MLP (4096 x
    11008, 270 MB in all). Every product's weight is broadcast along the batch dimension
    (forty-third session: the library lowering read it once per batch element)."""
    g = mf.Graph()
    x = g.input((8 * b, 1, 4096), "f16", "X")
    wg = g.input((4096, 11008), "f16", "Wg")
    wu = g.input((4096, 11008), "f16", "Wu")
    wd = g.input((11008, 4096), "f16", "Wd")
    g.output(g.matmul(g.mul(g.silu(g.matmul(x, wg)), g.matmul(x, wu)), wd))
    return g.build()


def decoder_post_attention(b: int = 1) -> KernelGraph:
    """The middle of a Llama-7B decoder layer at decode as the PyTorch bridge cuts it (its
    region 3): the attention output's per-head projection summed over heads plus the
    residual, that sum's rms_norm (eps 1e-6) times a gain, and the MLP's gate product; all
    three are returned (the rest of the layer reads them). A program of several outputs: the
    search's cone joins (``search/cone_seeds.py``) give it more than its lowering."""
    g = mf.Graph()
    x = g.input((b, 1, 1, 4096), "f16", "X")
    attn = g.input((b, 32, 1, 128), "f16", "Attn")
    wo = g.input((32, 128, 4096), "f16", "Wo")
    gain = g.input((4096,), "f16", "Gain")
    wg = g.input((4096, 11008), "f16", "Wg")
    a = g.add(x, g.sum(g.matmul(attn, wo), axis=-3, keepdims=True))
    h = g.mul(g.rms_norm(a, eps=1e-6), gain)
    g.output(a, h, g.matmul(h, wg))
    return g.build()


def decoder_mlp(b: int = 1) -> KernelGraph:
    """The end of a Llama-7B decoder layer at decode as the PyTorch bridge cuts it (its region
    4): silu of the gate product (computed by the region before) times the up product, the
    down product, plus the residual. One output, a chain of two products: the search's cut
    joins (``search/cone_seeds.py``) split it before the down product."""
    g = mf.Graph()
    gate = g.input((b, 1, 1, 11008), "f16", "Gate")
    h = g.input((b, 1, 1, 4096), "f16", "H")
    wu = g.input((4096, 11008), "f16", "Wu")
    wd = g.input((11008, 4096), "f16", "Wd")
    res = g.input((b, 1, 1, 4096), "f16", "Res")
    g.output(g.add(g.matmul(g.mul(g.silu(gate), g.matmul(h, wu)), wd), res))
    return g.build()


def decoder_qkv(b: int = 1) -> KernelGraph:
    """The start of a Llama-7B decoder layer at decode as the PyTorch bridge cuts it (its
    region 0): rms_norm (eps 1e-6) of the hidden state times a gain, its q, k and v
    projections per head (weights (32, 4096, 128)), and q times the key cache (1024 keys);
    q, k, v and the scores are returned. Four outputs from independent weights: cone joins
    whose projection cones are rms_norm loop seeds (``search/cone_seeds.py``,
    ``search/loop_seeds.py``)."""
    g = mf.Graph()
    x = g.input((b, 1, 1, 4096), "f16", "X")
    gain = g.input((4096,), "f16", "Gain")
    ws = [g.input((32, 4096, 128), "f16", f"W{c}") for c in "qkv"]
    kc = g.input((b, 32, 128, 1024), "f16", "Kcache")
    h = g.mul(g.rms_norm(x, eps=1e-6), gain)
    q, k, v = (g.matmul(h, w) for w in ws)
    g.output(q, k, v, g.matmul(q, kc))
    return g.build()


def partial_tile_attention(b: int = 1) -> KernelGraph:
    """Scaled attention with 24 query rows per head (one full and one partial 16-row tile), a
    32-wide V and 8 heads: the register chain's partial row tiles and k slices (tenth session,
    ``check_partial_tile_attention.py``)."""
    return _scaled_attention(8 * b, 24, 64, 2048, 32)


def layernorm_matmul(b: int = 1) -> KernelGraph:
    g = mf.Graph()
    x = g.input((8 * b, 1024), "f16", "X")
    w = g.input((1024, 2048), "f16", "W")
    c = g.sub(x, g.mean(x, axis=-1, keepdims=True))
    var = g.mean(g.square(c), axis=-1, keepdims=True)
    g.output(g.matmul(g.div(c, g.sqrt(var)), w))
    return g.build()


def norm_gain_matmul(b: int = 1) -> KernelGraph:
    g = mf.Graph()
    x = g.input((8 * b, 4096), "f16", "X")
    gain = g.input((4096,), "f16", "G")
    w = g.input((4096, 4096), "f16", "W")
    g.output(g.matmul(g.rms_norm(x, gain), w))
    return g.build()


def swish_matmul(b: int = 1) -> KernelGraph:
    g = mf.Graph()
    x = g.input((8 * b, 4096), "f16", "X")
    w = g.input((4096, 4096), "f16", "W")
    g.output(g.matmul(g.mul(x, g.sigmoid(x)), w))
    return g.build()


def _gated(act: str, b: int) -> KernelGraph:
    g = mf.Graph()
    x = g.input((8 * b, 4096), "f16", "X")
    w1 = g.input((4096, 4096), "f16", "W1")
    w2 = g.input((4096, 4096), "f16", "W2")
    g.output(g.mul(g.op(act, g.matmul(x, w1)), g.matmul(x, w2)))
    return g.build()


def sigmoid_gated_mlp(b: int = 1) -> KernelGraph:
    return _gated("sigmoid", b)


def gelu_gated_mlp(b: int = 1) -> KernelGraph:
    return _gated("gelu", b)


def exp_bmm(b: int = 1) -> KernelGraph:
    g = mf.Graph()
    a = g.input((4 * b, 64, 64), "f16", "A")
    bb = g.input((4 * b, 64, 1024), "f16", "B")
    c = g.input((4 * b, 1024, 64), "f16", "C")
    g.output(g.matmul(g.exp(g.matmul(a, bb)), c))
    return g.build()


def lora_residual(b: int = 1) -> KernelGraph:
    """A rank-32 adapter with a residual: X·W + (X·A)·B + R, X (32b, 1024), W (1024, 2048),
    A (1024, 32), B (32, 2048): lora's shape of program at other sizes, with a third term
    (twentieth session: the search may multiply X by A·B, a product another product reads)."""
    g = mf.Graph()
    x = g.input((32 * b, 1024), "f16", "X")
    w = g.input((1024, 2048), "f16", "W")
    a = g.input((1024, 32), "f16", "A")
    bb = g.input((32, 2048), "f16", "B")
    r = g.input((32 * b, 2048), "f16", "R")
    g.output(g.add(g.add(g.matmul(x, w), g.matmul(g.matmul(x, a), bb)), r))
    return g.build()


def rms_rows24_matmul(b: int = 1) -> KernelGraph:
    """rmsnorm's program at other sizes, with rows that are not a multiple of the fragment's 16:
    rms_norm(X) · W, X (24b, 3072), W (3072, 5120) (twenty-sixth session: a fold summed from
    A fragments over one full and one partial 16-row tile)."""
    return _rms_matmul(24 * b, 3072, 5120)


def sum_matmul(b: int = 1) -> KernelGraph:
    """(X + Y) · W, X and Y (12b, 4096), W (4096, 5120): an elementwise op of two activations
    before the product (twenty-seventh session: its fused loop read X and Y in place every
    iteration until such tiles were prefetched)."""
    g = mf.Graph()
    x = g.input((12 * b, 4096), "f16", "X")
    y = g.input((12 * b, 4096), "f16", "Y")
    w = g.input((4096, 5120), "f16", "W")
    g.output(g.matmul(g.add(x, y), w))
    return g.build()


def gated_down(b: int = 1) -> KernelGraph:
    """(silu(X) ⊙ Y) · W, X and Y (8b, 4096), W (4096, 4096): an MLP's gated down projection
    with its gate and up activations as inputs (twenty-ninth session, written to try
    Schedule.a_op_fragments: the search finds one fused loop whose product's A is the whole
    expression)."""
    g = mf.Graph()
    x = g.input((8 * b, 4096), "f16", "X")
    y = g.input((8 * b, 4096), "f16", "Y")
    w = g.input((4096, 4096), "f16", "W")
    g.output(g.matmul(g.mul(g.silu(x), y), w))
    return g.build()


def softmax_matmul(b: int = 1) -> KernelGraph:
    """softmax(S) · V without the max subtraction, S (16b, 2048) scores, V (2048, 1024): a
    row normalization that needs whole rows before the product, or the fold of flash
    attention (thirty-first session, written to try loop-free kernels' row statistics)."""
    g = mf.Graph()
    s = g.input((16 * b, 2048), "f16", "S")
    v = g.input((2048, 1024), "f16", "V")
    e = g.exp(s)
    g.output(g.matmul(g.div(e, g.sum(e, axis=-1, keepdims=True)), v))
    return g.build()


def _rms_matmul(rows: int, k: int, n: int, dtype: str = "f16") -> KernelGraph:
    """rms_norm(X) · W, X (rows, k), W (k, n)."""
    g = mf.Graph()
    x = g.input((rows, k), dtype, "X")
    w = g.input((k, n), dtype, "W")
    g.output(g.matmul(g.rms_norm(x), w))
    return g.build()


def _matmul(rows: int, k: int, n: int, dtype: str = "f16") -> KernelGraph:
    """X · W, X (rows, k), W (k, n)."""
    g = mf.Graph()
    x = g.input((rows, k), dtype, "X")
    w = g.input((k, n), dtype, "W")
    g.output(g.matmul(x, w))
    return g.build()


def _silu_gated(rows: int, k: int, n: int, dtype: str = "f16") -> KernelGraph:
    """silu(X·W1) ⊙ (X·W2), X (rows, k), W1 and W2 (k, n)."""
    g = mf.Graph()
    x = g.input((rows, k), dtype, "X")
    w1 = g.input((k, n), dtype, "W1")
    w2 = g.input((k, n), dtype, "W2")
    g.output(g.mul(g.op("silu", g.matmul(x, w1)), g.matmul(x, w2)))
    return g.build()


def _bias_gelu(rows: int, k: int, n: int) -> KernelGraph:
    """gelu(X · W + c), X (rows, k), W (k, n), c (n,) a bias row."""
    g = mf.Graph()
    x = g.input((rows, k), "f16", "X")
    w = g.input((k, n), "f16", "W")
    c = g.input((n,), "f16", "C")
    g.output(g.gelu(g.add(g.matmul(x, w), c)))
    return g.build()


def bias_gelu_matmul(b: int = 1) -> KernelGraph:
    """gelu(X · W + c), X (16b, 4096), W (4096, 4096), c (4096,) a bias row: an MLP's up
    projection with its epilogue (thirty-first session)."""
    return _bias_gelu(16 * b, 4096, 4096)


def residual_rmsnorm(b: int = 1) -> KernelGraph:
    """rms_norm(X + R, G), X and R (32b, 4096), G (4096,): a residual add and its norm, no
    product: row work only, bound by launches and latency (thirty-first session)."""
    g = mf.Graph()
    x = g.input((32 * b, 4096), "f16", "X")
    r = g.input((32 * b, 4096), "f16", "R")
    gain = g.input((4096,), "f16", "G")
    g.output(g.rms_norm(g.add(x, r), gain))
    return g.build()


def prefill_matmul(b: int = 1) -> KernelGraph:
    """X · W, X (512b, 2048), W (2048, 2048): a prompt's projection, compute-bound (no other
    program here has more than 32 rows; thirty-second session)."""
    return _matmul(512 * b, 2048, 2048)


def _prefill_attention(b: int, dtype: str) -> KernelGraph:
    """softmax(Q·K) · V without max subtraction, 512 queries and 512 keys a head, 8b heads of
    64, K stored transposed."""
    g = mf.Graph()
    q = g.input((8 * b, 512, 64), dtype, "Q")
    k = g.input((8 * b, 64, 512), dtype, "K")
    v = g.input((8 * b, 512, 64), dtype, "V")
    e = g.exp(g.matmul(q, k))
    g.output(g.div(g.matmul(e, v), g.sum(e, axis=-1, keepdims=True)))
    return g.build()


def prefill_attention(b: int = 1) -> KernelGraph:
    """softmax(Q·K) · V over 512 queries and 512 keys a head, 8b heads of 64: attention over a
    prompt, where the products are large (thirty-second session)."""
    return _prefill_attention(b, "f16")


def prefill_bias_gelu(b: int = 1) -> KernelGraph:
    """gelu(X · W + c), X (512b, 2048), W (2048, 2048), c (2048,): bias_gelu_matmul over a
    prompt's 512 rows, a compute-bound product with its epilogue (thirty-second session)."""
    return _bias_gelu(512 * b, 2048, 2048)


def grouped_matmul(b: int = 1) -> KernelGraph:
    """X · W batched over 8 experts, X (8, 128b, 1024), W (8, 1024, 512): a mixture of experts'
    projections of the tokens routed to each, one batched GEMM (thirty-second session)."""
    g = mf.Graph()
    x = g.input((8, 128 * b, 1024), "f16", "X")
    w = g.input((8, 1024, 512), "f16", "W")
    g.output(g.matmul(x, w))
    return g.build()


def prefill_gated_mlp(b: int = 1) -> KernelGraph:
    """silu(X·W1) ⊙ (X·W2), X (512b, 2048), W1 and W2 (2048, 2048): a gated MLP's up
    projection over a prompt's 512 rows, two compute-bound products of the same X (thirty-third
    session)."""
    return _silu_gated(512 * b, 2048, 2048)


def wide_rmsnorm(b: int = 1) -> KernelGraph:
    """rms_norm(X, G), X (4096b, 4096): a norm over many rows, bound by memory bandwidth
    (32 MB in, 32 MB out; thirty-second session)."""
    g = mf.Graph()
    x = g.input((4096 * b, 4096), "f16", "X")
    gain = g.input((4096,), "f16", "G")
    g.output(g.rms_norm(x, gain))
    return g.build()


def rmsnorm_bf16(b: int = 1) -> KernelGraph:
    """rmsnorm(X) · W in bf16 at the benchmark's rmsnorm shape, X (2b, 4096), W (4096, 6144):
    the dtype most models are served in (thirty-fourth session)."""
    return _rms_matmul(2 * b, 4096, 6144, "bf16")


def gated_mlp_bf16(b: int = 1) -> KernelGraph:
    """silu(X·W1) ⊙ (X·W2) in bf16 at the benchmark's gated_mlp shape, X (8, 4096), W1 and W2
    (4096, 4096) (thirty-fourth session)."""
    return _silu_gated(8, 4096, 4096, "bf16")


def prefill_matmul_bf16(b: int = 1) -> KernelGraph:
    """X · W in bf16, X (512b, 2048), W (2048, 2048): prefill_matmul's product in bf16
    (thirty-fourth session)."""
    return _matmul(512 * b, 2048, 2048, "bf16")


def rmsnorm_f32(b: int = 1) -> KernelGraph:
    """rmsnorm(X) · W in fp32 at the benchmark's rmsnorm shape, X (2b, 4096), W (4096, 6144):
    PyTorch's default dtype, what a model not yet cast to half precision runs in (the
    products on CUDA cores; torch's baseline is cuBLAS's sgemm, no TF32; thirty-seventh
    session)."""
    return _rms_matmul(2 * b, 4096, 6144, "f32")


def gated_mlp_f32(b: int = 1) -> KernelGraph:
    """silu(X·W1) ⊙ (X·W2) in fp32 at the benchmark's gated_mlp shape, X (8b, 4096), W1 and
    W2 (4096, 4096) (thirty-seventh session)."""
    return _silu_gated(8 * b, 4096, 4096, "f32")


def prefill_matmul_f32(b: int = 1) -> KernelGraph:
    """X · W in fp32, X (512b, 2048), W (2048, 2048): prefill_matmul's compute-bound product
    on the CUDA cores, against cuBLAS's sgemm (thirty-seventh session)."""
    return _matmul(512 * b, 2048, 2048, "f32")


def prefill_gated_mlp_f32(b: int = 1) -> KernelGraph:
    """silu(X·W1) ⊙ (X·W2) in fp32, X (512b, 2048), W1 and W2 (2048, 2048): the prompt's gated
    up projection, two compute-bound products of one X, against cuBLAS's sgemm (thirty-ninth
    session: products as TF32 MMAs, Schedule.tf32x3)."""
    return _silu_gated(512 * b, 2048, 2048, "f32")


def mlp_gelu_f32(b: int = 1) -> KernelGraph:
    """gelu(X · W + c) in fp32, X (128b, 1024), W (1024, 4096), c (4096,): a small model's MLP
    up projection run in PyTorch's default dtype, between the skinny and the prefill sizes
    (thirty-ninth session)."""
    g = mf.Graph()
    x = g.input((128 * b, 1024), "f32", "X")
    w = g.input((1024, 4096), "f32", "W")
    c = g.input((4096,), "f32", "c")
    g.output(g.op("gelu", g.add(g.matmul(x, w), c)))
    return g.build()


def prefill_attention_f32(b: int = 1) -> KernelGraph:
    """prefill_attention in fp32: softmax(Q·K) · V over 512 queries and 512 keys a head, 8b
    heads of 64 (thirty-ninth session)."""
    return _prefill_attention(b, "f32")


def gpt2_post_attention(b: int = 1) -> KernelGraph:
    """The middle of a GPT-2 (124M) block at decode: the attention heads' output projection
    (12 heads of 64, summed) plus the residual, its layer norm (eps 1e-5, gain and bias), and
    the MLP's first product with its bias through gelu; the residual sum and the activation
    are returned. A layer norm (not a loop seed: its centring) between two projections, two
    outputs: cone joins and the cut joins (``search/cone_seeds.py``)."""
    g = mf.Graph()
    x = g.input((b, 1, 1, 768), "f16", "X")
    a = g.input((b, 12, 1, 64), "f16", "Attn")
    wo = g.input((12, 64, 768), "f16", "Wo")
    gain = g.input((768,), "f16", "Gain")
    bias = g.input((768,), "f16", "Bias")
    w1 = g.input((768, 3072), "f16", "W1")
    b1 = g.input((3072,), "f16", "B1")
    r = g.add(x, g.sum(g.matmul(a, wo), axis=-3, keepdims=True))
    c = g.sub(r, g.mean(r, axis=-1, keepdims=True))
    var = g.mean(g.square(c), axis=-1, keepdims=True)
    h = g.add(g.mul(g.mul(c, g.rsqrt(g.add_scalar(var, 1e-5))), gain), bias)
    g.output(r, g.gelu(g.add(g.matmul(h, w1), b1)))
    return g.build()


def layernorm_gain_projection(b: int = 1) -> KernelGraph:
    """A layer norm with eps and gain (no bias) before a 2048 x 2048 projection, on 4b rows:
    its cut join (the norm as one row-wise kernel, the projection a loop lift) against its
    one-kernel lift of 8-column strips of W."""
    g = mf.Graph()
    x = g.input((4 * b, 2048), "f16", "X")
    gain = g.input((2048,), "f16", "Gain")
    w = g.input((2048, 2048), "f16", "W")
    c = g.sub(x, g.mean(x, axis=-1, keepdims=True))
    var = g.mean(g.square(c), axis=-1, keepdims=True)
    g.output(g.matmul(g.mul(g.mul(c, g.rsqrt(g.add_scalar(var, 1e-5))), gain), w))
    return g.build()


def _layer_norm(g: mf.Graph, x: Any, gain: Any, bias: Any) -> Any:
    """nn.LayerNorm(eps=1e-5) as the PyTorch bridge translates it."""
    c = g.sub(x, g.mean(x, axis=-1, keepdims=True))
    var = g.mean(g.square(c), axis=-1, keepdims=True)
    return g.add(g.mul(g.mul(c, g.rsqrt(g.add_scalar(var, 1e-5))), gain), bias)


def vit_ln_qkv(b: int = 1) -> KernelGraph:
    """ViT-Base's first region (197 tokens, a prime count of rows): LayerNorm with gain and
    bias, then the fused q/k/v projection 768 -> 2304 with its bias."""
    g = mf.Graph()
    x = g.input((b, 197, 768), "f16", "X")
    gain, bias = g.input((768,), "f16", "Gain"), g.input((768,), "f16", "Bias")
    w, wb = g.input((768, 2304), "f16", "W"), g.input((2304,), "f16", "WBias")
    g.output(g.add(g.matmul(_layer_norm(g, x, gain, bias), w), wb))
    return g.build()


def vit_attention(b: int = 1) -> KernelGraph:
    """ViT-Base's attention as scaled_dot_product_attention translates it: 12 heads of 64 over
    197 tokens and 197 keys (K stored transposed), no mask."""
    g = mf.Graph()
    q = g.input((b, 12, 197, 64), "f16", "Q")
    k = g.input((b, 12, 64, 197), "f16", "K")
    v = g.input((b, 12, 197, 64), "f16", "V")
    e = g.exp(g.mul_scalar(g.matmul(q, k), scalar=0.125))
    g.output(g.matmul(g.div(e, g.sum(e, axis=-1, keepdims=True)), v))
    return g.build()


def vitl_attention(b: int = 1) -> KernelGraph:
    """ViT-L/14's attention at 224 px: 16 heads of 64 over 257 tokens (a prime; K stored
    transposed), written with the row sums after the product as a user may write it."""
    g = mf.Graph()
    q = g.input((b, 16, 257, 64), "f16", "Q")
    k = g.input((b, 16, 64, 257), "f16", "K")
    v = g.input((b, 16, 257, 64), "f16", "V")
    e = g.exp(g.mul_scalar(g.matmul(q, k), scalar=0.125))
    g.output(g.div(g.matmul(e, v), g.sum(e, axis=-1, keepdims=True)))
    return g.build()


def vit_proj_ln(b: int = 1) -> KernelGraph:
    """ViT-Base's third region: the attention's output projection with bias plus the residual,
    then the second LayerNorm; the residual sum and the normed rows are returned."""
    g = mf.Graph()
    x = g.input((b, 197, 768), "f16", "X")
    a = g.input((b, 197, 768), "f16", "Attn")
    w, wb = g.input((768, 768), "f16", "W"), g.input((768,), "f16", "WBias")
    gain, bias = g.input((768,), "f16", "Gain"), g.input((768,), "f16", "Bias")
    r = g.add(x, g.add(g.matmul(a, w), wb))
    g.output(r, _layer_norm(g, r, gain, bias))
    return g.build()


def _vit_mlp(b: int, tokens: int, d: int, hidden: int) -> KernelGraph:
    """A ViT block's MLP: the normed rows H through d -> hidden with bias, tanh gelu, hidden ->
    d with bias, plus the residual X."""
    g = mf.Graph()
    x = g.input((b, tokens, d), "f16", "X")
    h = g.input((b, tokens, d), "f16", "H")
    w1, b1 = g.input((d, hidden), "f16", "W1"), g.input((hidden,), "f16", "B1")
    w2, b2 = g.input((hidden, d), "f16", "W2"), g.input((d,), "f16", "B2")
    u = g.gelu(g.add(g.matmul(h, w1), b1))
    g.output(g.add(x, g.add(g.matmul(u, w2), b2)))
    return g.build()


def vit_mlp(b: int = 1) -> KernelGraph:
    """ViT-Base's MLP: 768 -> 3072 with bias, tanh gelu, 3072 -> 768 with bias, plus the
    residual, on 197 tokens."""
    return _vit_mlp(b, 197, 768, 3072)


def vitl_mlp(b: int = 1) -> KernelGraph:
    """ViT-L/14's MLP at 224 px: 257 tokens (a prime above 256), 1024 -> 4096 -> 1024 (a
    program tried as a user would in s50)."""
    return _vit_mlp(b, 257, 1024, 4096)


def sd_cross_attention(b: int = 1) -> KernelGraph:
    """Stable Diffusion 1.x's cross-attention in a 32 x 32 block at 512 px, as
    ``F.scaled_dot_product_attention`` translates it: 1024 latent tokens attend to CLIP's 77
    text tokens, 8 heads of 40 (no multiple of 16), two images a batch (classifier-free
    guidance), K stored transposed (a program tried as a user would in s51)."""
    g = mf.Graph()
    q = g.input((2 * b, 8, 1024, 40), "f16", "Q")
    k = g.input((2 * b, 8, 40, 77), "f16", "K")
    v = g.input((2 * b, 8, 77, 40), "f16", "V")
    e = g.exp(g.mul_scalar(g.matmul(q, k), scalar=40 ** -0.5))
    g.output(g.matmul(g.div(e, g.sum(e, axis=-1, keepdims=True)), v))
    return g.build()


def prenorm_gelu_projection(b: int = 1) -> KernelGraph:
    """gelu(rms_norm(X, G) · W) over 197 tokens, 768 -> 3072: a pre-norm MLP's first half,
    whose fused kernels the verifier could not decide before s51 (a random function of
    another one's output over 605 000 elements: the run returned the input program)."""
    g = mf.Graph()
    x = g.input((b, 197, 768), "f16", "X")
    gain, w = g.input((768,), "f16", "G"), g.input((768, 3072), "f16", "W")
    g.output(g.gelu(g.matmul(g.rms_norm(x, gain), w)))
    return g.build()


PROGRAMS: dict[str, Callable[[int], KernelGraph]] = {
    "scaled_attention": scaled_attention, "softcap_attention": softcap_attention,
    "layernorm_matmul": layernorm_matmul,
    "norm_gain_matmul": norm_gain_matmul, "swish_matmul": swish_matmul,
    "sigmoid_gated_mlp": sigmoid_gated_mlp, "gelu_gated_mlp": gelu_gated_mlp, "exp_bmm": exp_bmm,
    "partial_tile_attention": partial_tile_attention, "lora_residual": lora_residual,
    "rms_rows24_matmul": rms_rows24_matmul, "sum_matmul": sum_matmul, "gated_down": gated_down,
    "softmax_matmul": softmax_matmul, "bias_gelu_matmul": bias_gelu_matmul,
    "residual_rmsnorm": residual_rmsnorm, "prefill_matmul": prefill_matmul,
    "prefill_attention": prefill_attention, "wide_rmsnorm": wide_rmsnorm,
    "prefill_bias_gelu": prefill_bias_gelu, "grouped_matmul": grouped_matmul,
    "prefill_gated_mlp": prefill_gated_mlp, "rmsnorm_bf16": rmsnorm_bf16,
    "gated_mlp_bf16": gated_mlp_bf16, "prefill_matmul_bf16": prefill_matmul_bf16,
    "rmsnorm_f32": rmsnorm_f32, "gated_mlp_f32": gated_mlp_f32,
    "prefill_matmul_f32": prefill_matmul_f32, "prefill_gated_mlp_f32": prefill_gated_mlp_f32,
    "mlp_gelu_f32": mlp_gelu_f32, "prefill_attention_f32": prefill_attention_f32,
    "decode_gated_mlp": decode_gated_mlp,
    "decoder_post_attention": decoder_post_attention,
    "decoder_qkv": decoder_qkv,
    "decoder_mlp": decoder_mlp,
    "gpt2_post_attention": gpt2_post_attention,
    "layernorm_gain_projection": layernorm_gain_projection,
    "vit_ln_qkv": vit_ln_qkv, "vit_attention": vit_attention, "vit_proj_ln": vit_proj_ln,
    "vit_mlp": vit_mlp, "vitl_attention": vitl_attention, "vitl_mlp": vitl_mlp,
    "sd_cross_attention": sd_cross_attention, "prenorm_gelu_projection": prenorm_gelu_projection,
}


def run_one(name: str, args: argparse.Namespace, outdir: Path) -> dict[str, Any]:
    prog = PROGRAMS[name](args.batch)
    input_us = estimate(prog).seconds * 1e6
    t = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        res = superoptimize(prog, budget_s=args.budget, workers=args.workers, progress=False, gpu=False,
                            compile_best=False, oracle_cache=Path(tmp) / "oracle_cache.sqlite")
    wall = time.monotonic() - t
    res.save(outdir / name)
    s = res.search.summary()
    best = res.accepted[0] if res.accepted else None
    best_us = best.cost.seconds * 1e6 if best else None
    row = {"program": name, "batch": args.batch, "space": res.search.config.name, "wall_s": round(wall, 2),
           "input_est_us": round(input_us, 3), "best_est_us": None if best_us is None else round(best_us, 3),
           "speedup_est": None if best_us is None else round(input_us / best_us, 3),
           "no_worse_than_input": best_us is not None and best_us <= input_us * (1 + 1e-9),
           "best_kernels": len(best.graph.kernels) if best else None,
           "best_is_input": bool(best and best.graph.key == prog.key),
           "flagged_float64": len(res.flagged), **{k: s[k] for k in (
               "units", "stopped", "time_to_first_s", "time_to_best_s", "visited", "verified", "accepted")},
           "config": res.search.config.to_dict(),
           "best": str(best.graph) if best else None}
    print(json.dumps({k: v for k, v in row.items() if k not in ("best", "config")}), flush=True)
    return row


def to_markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    out = ["# search_outside", "",
           "Programs outside the benchmark set, each optimised from scratch with default options "
           f"(derived search space) and a {meta['budget']} s budget, {meta['workers']} workers, batch "
           f"{meta['batch']}, no GPU (ranked by the cost model). Command: `PYTHONPATH=. python3 "
           f"benchmarks/search_outside.py --budget {meta['budget']}`. Machine: {meta['machine']}", "",
           "| program | units | stopped | first s | best s | input est µs | best est µs | est speedup | "
           "no worse than input | best kernels | verified | accepted | f64 flagged |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['program']} | {r['units']} | {r['stopped'] or '-'} | {r['time_to_first_s']} | "
                   f"{r['time_to_best_s']} | {r['input_est_us']} | {r['best_est_us']} | {r['speedup_est']} | "
                   f"{'yes' if r['no_worse_than_input'] else 'NO'} | {r['best_kernels']} | {r['verified']} | "
                   f"{r['accepted']} | {r['flagged_float64']} |")
    out += ["", "Best μGraph per program:", ""]
    for r in rows:
        out += [f"## {r['program']}", "", "```", r["best"] or "(none)", "```", ""]
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", nargs="*", default=list(PROGRAMS))
    ap.add_argument("--budget", type=float, default=300.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "search_outside"))
    args = ap.parse_args()
    out = Path(args.out)
    rows = [run_one(p, args, Path(f"{out}_ugraphs")) for p in args.programs]
    meta = {"budget": args.budget, "workers": args.workers, "batch": args.batch, "machine": machine()}
    out.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{out}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    Path(f"{out}.md").write_text(to_markdown(rows, meta))


if __name__ == "__main__":
    main()
