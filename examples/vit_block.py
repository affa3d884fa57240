"""A ViT-style encoder block in plain PyTorch, as a user writes it (``nn.LayerNorm``, one
fused q/k/v ``nn.Linear``, views and transposes, ``F.scaled_dot_product_attention``), run under
``torch.compile(backend="mirage_formal")``.

    PYTHONPATH=. python examples/vit_block.py [--batch 1] [--tokens 197] [--budget 15]

The block: LayerNorm -> q/k/v projection -> attention over all tokens (no mask) -> output
projection (+ residual) -> LayerNorm -> MLP with tanh-approximated gelu (+ residual). The
views, transposes and the split of q, k and v are calls the registry lacks: they are region
boundaries and run with torch; the layer norms, projections, attention and MLP become regions
(``docs/torch.md``). ViT-Base's sizes by default (768 wide, 12 heads, 197 tokens).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class BlockShape:
    dim: int = 768
    heads: int = 12
    mlp: int = 3072


#: a few-second shape for tests and CPU smoke runs
TINY = BlockShape(dim=64, heads=4, mlp=128)


class EncoderBlock(nn.Module):
    def __init__(self, s: BlockShape = BlockShape()) -> None:
        super().__init__()
        self.heads = s.heads
        self.ln1 = nn.LayerNorm(s.dim)
        self.qkv = nn.Linear(s.dim, 3 * s.dim)
        self.proj = nn.Linear(s.dim, s.dim)
        self.ln2 = nn.LayerNorm(s.dim)
        self.fc = nn.Linear(s.dim, s.mlp)
        self.out = nn.Linear(s.mlp, s.dim)

    def forward(self, x: Any) -> Any:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


def block_inputs(batch: int, tokens: int, s: BlockShape = BlockShape(),
                 dtype: torch.dtype = torch.float32, device: str = "cpu",
                 seed: int = 0) -> tuple[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(batch, tokens, s.dim, generator=gen).to(device, dtype),)


def main() -> None:
    import mirage_formal as mf

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--tokens", type=int, default=197)
    ap.add_argument("--budget", type=float, default=15.0)
    a = ap.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.float16 if device == "cuda" else torch.float32
    torch.manual_seed(0)
    block = EncoderBlock().to(device, dtype).eval()
    (x,) = block_inputs(a.batch, a.tokens, dtype=dtype, device=device)
    fast = mf.compile(block, budget_s=a.budget)
    with torch.no_grad():
        err = (fast(x).double() - block(x).double()).abs().max().item()
    for r in fast.regions:
        print(r.line())
    print(f"max |difference| from eager: {err:.2e}")


if __name__ == "__main__":
    main()
