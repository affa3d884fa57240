"""A small function with two regions and a boundary, for the backend suites and for the
second-process cache test (which imports this file by path). Not a test file."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

#: a search space small enough for CI's 2 cores (the same as tests/optimize's)
TINY_SPACE = {"grid_sizes": [2, 16], "forloop": [1, 4], "max_block_ops": 6}


def f(x: Any, w1: Any, w2: Any, w3: Any) -> Any:
    h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    y = F.silu(h @ w1) * (h @ w2)
    return (y.view(2, 4, 16) @ w3).sum(-1)  # the view is a region boundary


def args() -> tuple[Any, ...]:
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(*s, generator=g) for s in ((8, 16), (16, 16), (16, 16), (16, 4)))
