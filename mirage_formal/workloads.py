"""The eight benchmark programs (attention variants, RMSNorm + matmul, LoRA, gated MLP, nGPT
update), and hand-written μGraphs for two of them.

Each program is a function ``name(batch=1, **sizes) -> KernelGraph`` built with the public
builder; the keyword sizes default to the benchmark's shapes and let tests use small ones.
``program(name, batch)`` looks one up by name; ``handwritten(name, batch)`` returns the
expert μGraph (rmsnorm fused into one kernel, gqa as two FlashDecoding-style kernels).

Imports ``ir`` only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mirage_formal.errors import MirageError
from mirage_formal.ir.builder import Graph, Tensor
from mirage_formal.ir.graph import KernelGraph


def _attention(b_heads: int, q: int, d: int, kv: int, qknorm: bool = False,
               dtype: str = "f16") -> KernelGraph:
    g = Graph()
    Q = g.input((b_heads, q, d), dtype, "Q")
    K = g.input((b_heads, d, kv), dtype, "K")
    V = g.input((b_heads, kv, d), dtype, "V")
    if qknorm:
        Q = g.rms_norm(Q)
        V = g.rms_norm(V)
    e = g.exp(g.matmul(Q, K))
    p = g.div(e, g.sum(e, axis=-1, keepdims=True))
    g.output(g.matmul(p, V))
    return g.build()


def gqa(batch: int = 1, heads: int = 2, q: int = 256, d: int = 64, kv: int = 4096) -> KernelGraph:
    """O = (exp(QK) / Σ_last exp(QK)) · V, with 2b KV heads and 256 grouped query rows."""
    return _attention(heads * batch, q, d, kv)


def mha(batch: int = 1, heads: int = 32, q: int = 16, d: int = 64, kv: int = 4096) -> KernelGraph:
    return _attention(heads * batch, q, d, kv)


def mqa(batch: int = 1, q: int = 1024, d: int = 64, kv: int = 4096) -> KernelGraph:
    return _attention(batch, q, d, kv)


def qknorm_gqa(batch: int = 1, heads: int = 2, q: int = 256, d: int = 64, kv: int = 4096) -> KernelGraph:
    """softmax(rmsnorm(Q)·K) · rmsnorm(V), rmsnorm over the last dimension."""
    return _attention(heads * batch, q, d, kv, qknorm=True)


def rmsnorm(batch: int = 1, rows: int = 2, h: int = 4096, n: int = 6144) -> KernelGraph:
    """rmsnorm(X) · W with rmsnorm = x / sqrt(mean(x²)) (no gain, no epsilon)."""
    g = Graph()
    X = g.input((rows * batch, h), "f16", "X")
    W = g.input((h, n), "f16", "W")
    g.output(g.matmul(g.rms_norm(X), W))
    return g.build()


def lora(batch: int = 1, m: int = 16, k: int = 256, n: int = 4096, r: int = 16) -> KernelGraph:
    """X·W + (X·A)·B. Does not depend on the batch size."""
    g = Graph()
    X = g.input((m, k), "f16", "X")
    W = g.input((k, n), "f16", "W")
    A = g.input((k, r), "f16", "A")
    B = g.input((r, n), "f16", "B")
    g.output(g.add(g.matmul(X, W), g.matmul(g.matmul(X, A), B)))
    return g.build()


def gated_mlp(batch: int = 1, m: int = 8, k: int = 4096, n: int = 4096) -> KernelGraph:
    """silu(X·W1) ⊙ (X·W2). Does not depend on the batch size."""
    g = Graph()
    X = g.input((m, k), "f16", "X")
    W1 = g.input((k, n), "f16", "W1")
    W2 = g.input((k, n), "f16", "W2")
    g.output(g.mul(g.silu(g.matmul(X, W1)), g.matmul(X, W2)))
    return g.build()


def ntrans(batch: int = 1, rows: int = 8, h: int = 4096) -> KernelGraph:
    """rmsnorm(X + α ⊙ (rmsnorm(H) + X)) (nGPT's normalized transformer update)."""
    g = Graph()
    H = g.input((rows * batch, h), "f16", "H")
    X = g.input((rows * batch, h), "f16", "X")
    alpha = g.input((rows * batch, h), "f16", "alpha")
    inner: Tensor = g.add(g.rms_norm(H), X)
    g.output(g.rms_norm(g.add(X, g.mul(alpha, inner))))
    return g.build()


PROGRAMS: dict[str, Callable[..., KernelGraph]] = {
    "gqa": gqa, "mha": mha, "mqa": mqa, "qknorm_gqa": qknorm_gqa,
    "rmsnorm": rmsnorm, "lora": lora, "gated_mlp": gated_mlp, "ntrans": ntrans,
}


def program(name: str, batch: int = 1, **sizes: Any) -> KernelGraph:
    """The benchmark program ``name`` at batch size ``batch``."""
    try:
        f = PROGRAMS[name]
    except KeyError:
        raise MirageError(f"unknown workload {name!r}; choose one of {sorted(PROGRAMS)}") from None
    if batch < 1:
        raise MirageError(f"batch size must be >= 1, got {batch}")
    return f(batch, **sizes)


# ---------------------------------------------------------------- hand-written μGraphs

def rmsnorm_fused(batch: int = 1, rows: int = 2, h: int = 4096, n: int = 6144,
                  col_tile: int = 64, k_tile: int = 128) -> KernelGraph:
    """One kernel: the RMS is accumulated in the same loop as the matmul, divided after."""
    g = Graph()
    X = g.input((rows * batch, h), "f16", "X")
    W = g.input((h, n), "f16", "W")
    k = g.kernel([X, W], grid=(n // col_tile, 1, 1), threads=128, forloop=h // k_tile)
    xt = k.iter(X, imap=(-1, -1, -1), fmap=1)
    wt = k.iter(W, imap=(1, -1, -1), fmap=0)
    acc = k.accum(k.matmul(xt, wt))
    rms = k.accum(xt, kind="rms", fold=1)
    k.output(k.div(acc, rms), omap=(1, -1, -1))
    (y,) = k.build()
    g.output(y)
    return g.build()


def gqa_flashdecoding(batch: int = 1, heads: int = 2, q: int = 256, d: int = 64, kv: int = 4096,
                      splits: int = 8, row_blocks: int = 16, kv_tile: int = 128,
                      combine_rows: int = 16) -> KernelGraph:
    """Two kernels: per key split, partial exp-sums and partial outputs; then a combine."""
    bh = heads * batch
    g = Graph()
    Q = g.input((bh, q, d), "f16", "Q")
    K = g.input((bh, d, kv), "f16", "K")
    V = g.input((bh, kv, d), "f16", "V")
    forloop = kv // splits // kv_tile
    k1 = g.kernel([Q, K, V], grid=(bh, splits, row_blocks), threads=128, forloop=forloop)
    qt = k1.iter(Q, imap=(0, -1, 1))
    kt = k1.iter(K, imap=(0, 2, -1), fmap=2)
    vt = k1.iter(V, imap=(0, 1, -1), fmap=1)
    e = k1.exp(k1.matmul(qt, kt))
    s = k1.accum(e, fold=1)
    o = k1.accum(k1.matmul(e, vt))
    k1.output(s, omap=(0, 2, 1))
    k1.output(o, omap=(0, 2, 1))
    sums, parts = k1.build()
    k2 = g.kernel([sums, parts], grid=(bh, q // combine_rows, 1), threads=128, forloop=1)
    st = k2.iter(sums, imap=(0, 1, -1))
    pt = k2.iter(parts, imap=(0, 1, -1))
    k2.output(k2.div(k2.accum(pt, fold=d), k2.accum(st, fold=1)), omap=(0, 1, -1))
    (out,) = k2.build()
    g.output(out)
    return g.build()


HANDWRITTEN: dict[str, Callable[..., KernelGraph]] = {
    "rmsnorm": rmsnorm_fused, "gqa": gqa_flashdecoding,
}


def handwritten(name: str, batch: int = 1, **sizes: Any) -> KernelGraph:
    try:
        f = HANDWRITTEN[name]
    except KeyError:
        raise MirageError(f"no hand-written μGraph for {name!r}; have {sorted(HANDWRITTEN)}") from None
    return f(batch, **sizes)
