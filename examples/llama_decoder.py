"""A Llama-style decoder layer at decode shapes, written in plain PyTorch that mirage-formal
captures whole, and run under ``torch.compile(backend="mirage_formal")``.

    PYTHONPATH=. python examples/llama_decoder.py [--batch 8] [--budget 10] [--full]

The layer: RMSNorm -> Q/K/V projections -> attention over a KV cache -> output projection
(+ residual) -> RMSNorm -> gated MLP (+ residual). Decode shapes: one new token per sequence.

It is written with the ops the registry has (no reshape, transpose or concatenation of
computed tensors), which shapes two choices:

- hidden states are ``(batch, 1, 1, hidden)``: the singleton axis is the head axis, so the
  per-head projection ``x @ Wq`` with ``Wq: (heads, hidden, head_dim)`` broadcasts to
  ``(batch, heads, 1, head_dim)`` without a view;
- the K cache is stored transposed, ``(batch, heads, head_dim, cache_len)``, and the new
  token's key and value join the softmax without a concatenation: its exp-score is added to
  the cache's exp-sum and its value to the weighted sum. That is exact attention over the
  ``cache_len + 1`` positions (softmax without the max shift; the scores are scaled by
  1/sqrt(head_dim)). The layer returns the new key and value for the caller to append.

A standard Llama layer (views, transposes, ``torch.cat``) also runs under the backend: the
unsupported calls become region boundaries and run with torch.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class LayerShape:
    hidden: int = 4096
    heads: int = 32
    head_dim: int = 128
    ffn: int = 11008
    cache_len: int = 1024


TINY = LayerShape(hidden=64, heads=2, head_dim=32, ffn=128, cache_len=16)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


class DecoderLayer(nn.Module):
    def __init__(self, s: LayerShape, eps: float = 1e-6) -> None:
        super().__init__()
        self.s, self.eps = s, eps
        self.scale = 1.0 / math.sqrt(s.head_dim)

        def per_head(a: int, b: int) -> nn.Parameter:
            return nn.Parameter(torch.randn(s.heads, a, b) / math.sqrt(a))

        self.attn_norm = nn.Parameter(1.0 + 0.1 * torch.randn(s.hidden))
        self.wq = per_head(s.hidden, s.head_dim)
        self.wk = per_head(s.hidden, s.head_dim)
        self.wv = per_head(s.hidden, s.head_dim)
        self.wo = per_head(s.head_dim, s.hidden)
        self.mlp_norm = nn.Parameter(1.0 + 0.1 * torch.randn(s.hidden))
        self.gate = nn.Linear(s.hidden, s.ffn, bias=False)
        self.up = nn.Linear(s.hidden, s.ffn, bias=False)
        self.down = nn.Linear(s.ffn, s.hidden, bias=False)

    def forward(
        self, x: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        # x: (b, 1, 1, hidden); k_cache: (b, heads, head_dim, S); v_cache: (b, heads, S, head_dim)
        h = rms_norm(x, self.attn_norm, self.eps)
        q = h @ self.wq  # (b, heads, 1, head_dim)
        k = h @ self.wk
        v = h @ self.wv
        e_cache = torch.exp((q @ k_cache) * self.scale)  # (b, heads, 1, S)
        e_new = torch.exp((q * k).sum(-1, keepdim=True) * self.scale)
        attn = (e_cache @ v_cache + e_new * v) / (e_cache.sum(-1, keepdim=True) + e_new)
        x = x + (attn @ self.wo).sum(1, keepdim=True)  # (b, 1, 1, hidden)
        h = rms_norm(x, self.mlp_norm, self.eps)
        x = x + self.down(F.silu(self.gate(h)) * self.up(h))
        return x, k, v


def decode_inputs(
    s: LayerShape,
    batch: int,
    dtype: torch.dtype = torch.float32,
    device: str = "cpu",
    seed: int = 0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, 1, 1, s.hidden, generator=g)
    k = torch.randn(batch, s.heads, s.head_dim, s.cache_len, generator=g)
    v = torch.randn(batch, s.heads, s.cache_len, s.head_dim, generator=g)
    return tuple(t.to(device, dtype) for t in (x, k, v))  # type: ignore[return-value]


def main() -> None:
    import mirage_formal as mf

    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--budget", type=float, default=10.0, help="search seconds per region")
    ap.add_argument(
        "--full", action="store_true", help="Llama-7B sizes (default: small sizes, fast on a CPU)"
    )
    a = ap.parse_args()
    s = LayerShape() if a.full else TINY
    device, dtype = ("cuda", torch.float16) if torch.cuda.is_available() else ("cpu", torch.float32)
    torch.manual_seed(0)
    layer = DecoderLayer(s).to(device, dtype).eval()
    args = decode_inputs(s, a.batch, dtype, device)
    cap = mf.from_torch(layer, *args)
    print(
        f"captured {sum(n.op != 'input' for n in cap.program.nodes)} registry ops; "
        f"parameters as inputs: {cap.parameters}"
    )
    fast = mf.compile(layer, budget_s=a.budget)
    with torch.no_grad():
        got, want = fast(*args), layer(*args)
    for r in fast.regions:
        print(r.line())
    err = max(float((g - w).abs().max() / w.abs().max()) for g, w in zip(got, want, strict=True))
    print(f"backend vs eager: max relative error {err:.2e}")


if __name__ == "__main__":
    main()
