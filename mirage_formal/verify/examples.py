"""Worked examples for the verifier: the QKNorm-GQA rewrite Mirage accepted, and its fix.

Mirage's published QKNorm-GQA μGraphs replace the scores ``Σ_d nQ[i,d]·K[d,k]`` by
``K[i/4,k]·Σ_d nQ[i,d]`` (nQ = rmsnorm(Q)): with 4·d query rows, grid axis y hands block b
the query rows 4b..4b+3 *and* row b of K, and the block multiplies the row sum of its nQ
tile by that K row instead of doing the matmul. Its check (primes 167 and 83, patterned
inputs, one test) passed. These builders make the wrong and the right μGraph at any size
with ``q == 4·d``, in two forms: one fused kernel (the block-level form Mirage produced) and
a kernel-level program whose scores come from a small kernel (the rewrite on its own).

Imports ``ir`` only.
"""

from __future__ import annotations

from mirage_formal.errors import MirageError
from mirage_formal.ir.builder import Graph, Tensor
from mirage_formal.ir.graph import KernelGraph


def _check(q: int, d: int) -> None:
    if q != 4 * d:
        raise MirageError(f"the QKNorm example needs q == 4*d (block b takes rows 4b..4b+3 and K row b); "
                          f"got q={q}, d={d}")


def qknorm_fused(heads: int = 2, q: int = 16, d: int = 4, kv: int = 32, wrong: bool = False) -> KernelGraph:
    """One kernel for softmax(rmsnorm(Q)·K)·rmsnorm(V); ``wrong`` uses Mirage's scores."""
    _check(q, d)
    g = Graph()
    Q = g.input((heads, q, d), "f16", "Q")
    K = g.input((heads, d, kv), "f16", "K")
    V = g.input((heads, kv, d), "f16", "V")
    k = g.kernel([Q, K, V], grid=(heads, q // 4, 1), threads=128, forloop=1)
    nq = k.rms_norm(k.iter(Q, imap=(0, 1, -1)))
    nv = k.rms_norm(k.iter(V, imap=(0, -1, -1)))
    if wrong:
        krow = k.iter(K, imap=(0, 1, -1))  # block b gets K[:, b, :]: the row i/4
        scores = k.mul(k.sum(nq, axis=-1, keepdims=True), krow)
    else:
        scores = k.matmul(nq, k.iter(K, imap=(0, -1, -1)))
    e = k.exp(scores)
    out = k.div(k.accum(k.matmul(e, nv)), k.accum(e, fold=1))
    k.output(out, omap=(0, 1, -1))
    (o,) = k.build()
    g.output(o)
    return g.build()


def qknorm_kernel_rewrite(heads: int = 2, q: int = 16, d: int = 4, kv: int = 32,
                          wrong: bool = True) -> KernelGraph:
    """The reference at kernel level with only the scores computed by a small kernel."""
    _check(q, d)
    g = Graph()
    Q = g.input((heads, q, d), "f16", "Q")
    K = g.input((heads, d, kv), "f16", "K")
    V = g.input((heads, kv, d), "f16", "V")
    nQ = g.rms_norm(Q)
    k = g.kernel([nQ, K], grid=(heads, q // 4, 1), threads=128, forloop=1)
    nq = k.iter(nQ, imap=(0, 1, -1))
    if wrong:
        s = k.mul(k.sum(nq, axis=-1, keepdims=True), k.iter(K, imap=(0, 1, -1)))
    else:
        s = k.matmul(nq, k.iter(K, imap=(0, -1, -1)))
    k.output(k.accum(s), omap=(0, 1, -1))
    (scores,) = k.build()
    e: Tensor = g.exp(scores)
    p = g.div(e, g.sum(e, axis=-1, keepdims=True))
    g.output(g.matmul(p, g.rms_norm(V)))
    return g.build()
