"""Write ``qknorm_gqa_wrong.mirage.json``: wrong μGraphs for QKNorm-GQA in Mirage's JSON format.

Each is shaped like the μGraphs Mirage published for QKNorm-GQA: a kernel that saves an exp
*beside* plain tensors (copies of Q, K or V) that a later kernel-level op feeds to rms_norm.
Each computes the wrong function (the comment says how). Reference:
``qknorm_gqa --batch 1 --size q=16 --size d=4 --size kv=32``: Q (2,16,4), K (2,4,32),
V (2,32,4). Run from the repository root: ``PYTHONPATH=.:tests python3 tests/data/make_qknorm_wrong.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

from mirage_export import export_mugraph

import mirage_formal as mf
from mirage_formal.ir.graph import KernelGraph

H, Q, D, KV = 2, 16, 4, 32
OUT = Path(__file__).with_name("qknorm_gqa_wrong.mirage.json")


def _inputs(g: mf.Graph) -> tuple[mf.Tensor, mf.Tensor, mf.Tensor]:
    return (g.input((H, Q, D), "f16", "Q"), g.input((H, D, KV), "f16", "K"),
            g.input((H, KV, D), "f16", "V"))


def exp_beside_copy(normalize_q: bool, copy_of: str, divide: bool, scale_v: bool) -> KernelGraph:
    """Kernel: exp(Q'·K) and a plain copy of one input; after it, rms_norm of the copy."""
    g = mf.Graph()
    q, k_, v = _inputs(g)
    qn = g.rms_norm(q) if normalize_q else q
    k = g.kernel([qn, k_, v], grid=(H, 1, 1), threads=128, forloop=1)
    e_tile = k.exp(k.matmul(k.iter(qn, imap=(0, -1, -1)), k.iter(k_, imap=(0, -1, -1))))
    k.output(k.accum(e_tile), omap=(0, -1, -1))
    src = {"V": v, "Q": q}[copy_of]
    k.output(k.accum(k.iter(src, imap=(0, -1, -1))), omap=(0, -1, -1))
    e, copy = k.build()
    p = g.div(e, g.sum(e, axis=-1, keepdims=True)) if divide else e
    nv = g.rms_norm(copy) if copy_of == "V" else g.rms_norm(v)
    if copy_of == "Q":  # the normalized copy of Q is added back to the output
        out = g.add(g.matmul(p, nv), g.rms_norm(copy))
    else:
        out = g.matmul(p, g.mul(nv, nv) if scale_v else nv)
    g.output(out)
    return g.build()


def cases() -> list[tuple[str, KernelGraph]]:
    return [
        ("Q not normalized before the scores", exp_beside_copy(False, "V", True, False)),
        ("softmax denominator missing", exp_beside_copy(True, "V", False, False)),
        ("rms_norm(V) squared", exp_beside_copy(True, "V", True, True)),
        ("Q not normalized; rms_norm of a Q copy added", exp_beside_copy(False, "Q", True, False)),
    ]


def main() -> None:
    data = [export_mugraph(g) for _, g in cases()]
    OUT.write_text(json.dumps(data, indent=None, separators=(",", ":")) + "\n")
    print(f"wrote {len(data)} μGraphs to {OUT}")


if __name__ == "__main__":
    main()
