"""Shared helpers of the PyTorch-bridge suites (skipped when torch is absent)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load_decoder() -> Any:
    """examples/llama_decoder.py as a module."""
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    import llama_decoder

    return llama_decoder


def rel_err(got: Any, want: Any) -> float:
    import torch

    g = torch.as_tensor(got, dtype=torch.float64)
    w = want.detach().to(torch.float64)
    return float((g - w).abs().max() / max(float(w.abs().max()), 1e-300))
