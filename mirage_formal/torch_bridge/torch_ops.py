"""Normalize the torch calls of an FX graph (as TorchDynamo records them) into :class:`Call`.

A Dynamo graph names the same computation many ways: ``x @ w``, ``torch.matmul``, ``torch.bmm``
and ``x.matmul(w)``; ``F.linear`` and ``torch._C._nn.linear``; ``x.float()`` and
``x.to(torch.float32)``. :func:`normalize` reads one FX node and returns a :class:`Call` with a
canonical *torch-side* name (``matmul``, ``linear``, ``cast``, ...), its tensor operands (FX
nodes, or Python scalars where torch allows them) and its keyword options, or ``None`` when the
call is not one mirage-formal maps. The mapping onto registry ops lives in :mod:`translate`;
this module only knows torch's spellings.

Imports torch (only ever imported lazily, from :mod:`mirage_formal.torch_bridge`).
"""

from __future__ import annotations

import builtins
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx
import torch.nn.functional as F


@dataclass(frozen=True)
class Call:
    """One torch call in canonical form: ``name(*args, **opts)``."""

    name: str
    args: tuple[Any, ...]
    opts: Mapping[str, Any] = field(default_factory=dict)


# (canonical name, positional parameter names, defaults) for every spelling we accept.
_SIGS: dict[str, tuple[str, tuple[str, ...], dict[str, Any]]] = {
    "add": ("add", ("input", "other"), {"alpha": 1}),
    "sub": ("sub", ("input", "other"), {"alpha": 1}),
    "mul": ("mul", ("input", "other"), {}),
    "div": ("div", ("input", "other"), {"rounding_mode": None}),
    "truediv": ("div", ("input", "other"), {}),
    "matmul": ("matmul", ("input", "other"), {}),
    "bmm": ("matmul", ("input", "other"), {}),
    "mm": ("matmul", ("input", "other"), {}),
    "linear": ("linear", ("input", "weight", "bias"), {"bias": None}),
    "addmm": ("addmm", ("input", "mat1", "mat2"), {"beta": 1, "alpha": 1}),
    "baddbmm": ("addmm", ("input", "batch1", "batch2"), {"beta": 1, "alpha": 1}),
    "neg": ("neg", ("input",), {}),
    "exp": ("exp", ("input",), {}),
    "silu": ("silu", ("input",), {"inplace": False}),
    "sigmoid": ("sigmoid", ("input",), {}),
    "tanh": ("tanh", ("input",), {}),
    "maximum": ("maximum", ("input", "other"), {}),
    "gelu": ("gelu", ("input",), {"approximate": "none"}),
    "relu": ("relu", ("input",), {"inplace": False}),
    "sqrt": ("sqrt", ("input",), {}),
    "rsqrt": ("rsqrt", ("input",), {}),
    "square": ("square", ("input",), {}),
    "pow": ("pow", ("input", "exponent"), {}),
    "mean": ("mean", ("input", "dim", "keepdim"), {"dim": None, "keepdim": False, "dtype": None}),
    "sum": ("sum", ("input", "dim", "keepdim"), {"dim": None, "keepdim": False, "dtype": None}),
    "softmax": (
        "softmax",
        ("input", "dim"),
        {"dim": None, "dtype": None, "_stacklevel": 3, "half_to_float": False},
    ),
    "layer_norm": (
        "layer_norm",
        ("input", "normalized_shape", "weight", "bias", "eps"),
        {"weight": None, "bias": None, "eps": 1e-5, "cudnn_enable": True},
    ),
    "rms_norm": ("rms_norm_call", ("input", "normalized_shape", "weight", "eps"),
                 {"weight": None, "eps": None}),
    "scaled_dot_product_attention": (
        "sdpa",
        ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale"),
        {"attn_mask": None, "dropout_p": 0.0, "is_causal": False, "scale": None,
         "enable_gqa": False},
    ),
    "transpose": ("transpose", ("input", "dim0", "dim1"), {}),
    "swapaxes": ("transpose", ("input", "dim0", "dim1"), {}),
    "t": ("t", ("input",), {}),
    "float": ("cast", ("input",), {"memory_format": None}),
    "half": ("cast", ("input",), {"memory_format": None}),
    "bfloat16": ("cast", ("input",), {"memory_format": None}),
    "double": ("cast", ("input",), {"memory_format": None}),
    "to": ("cast", ("input", "dtype"), {"dtype": None, "non_blocking": False, "copy": False}),
    "type_as": ("cast", ("input", "other"), {}),
    "contiguous": ("identity", ("input",), {"memory_format": None}),
    "clone": ("identity", ("input",), {"memory_format": None}),
    "detach": ("identity", ("input",), {}),
}


def _functions() -> dict[Any, str]:
    """Function objects Dynamo records, by the spelling name they stand for."""
    table: dict[Any, str] = {
        operator.add: "add",
        operator.sub: "sub",
        operator.mul: "mul",
        operator.truediv: "truediv",
        operator.matmul: "matmul",
        operator.neg: "neg",
        operator.pow: "pow",
    }
    for mod in (torch, F, torch.Tensor):
        for name in _SIGS:
            f = getattr(mod, name, None)
            if f is not None and callable(f):
                table.setdefault(f, name)
    for name in ("linear", "gelu", "silu", "relu"):
        f = getattr(torch._C._nn, name, None)
        if f is not None:
            table.setdefault(f, name)
    table.setdefault(torch.special.expit, "sigmoid")
    return table


_FUNCTIONS: dict[Any, str] | None = None


def _spelling(node: torch.fx.Node) -> str | None:
    global _FUNCTIONS
    if node.op == "call_method":
        return str(node.target) if node.target in _SIGS else None
    if node.op != "call_function":
        return None
    if _FUNCTIONS is None:
        _FUNCTIONS = _functions()
    try:
        return _FUNCTIONS.get(node.target)
    except TypeError:  # an unhashable target
        return None


def describe(node: torch.fx.Node) -> str:
    """How the user wrote the call: ``torch.cat``, ``Tensor.view``, ``operator.getitem``."""
    if node.op == "call_method":
        return f"Tensor.{node.target}"
    if node.op == "call_function":
        t = node.target
        mod = getattr(t, "__module__", None) or ""
        name = getattr(t, "__name__", None) or repr(t)
        if t is builtins.getattr and len(node.args) > 1:
            return f"Tensor.{node.args[1]}"
        if mod.startswith("torch._C._nn"):
            mod = "torch.nn.functional"
        elif mod.startswith("torch._C") or mod == "torch._VariableFunctionsClass":
            mod = "torch"
        return f"{mod}.{name}" if mod else name
    if node.op == "call_module":
        return f"module {node.target}"
    return f"{node.op} {node.target}"


def _bind(
    params: Sequence[str],
    defaults: Mapping[str, Any],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
) -> dict[str, Any] | None:
    if len(args) > len(params):
        return None
    out = dict(defaults)
    out.update(zip(params, args, strict=False))
    for k, v in kwargs.items():
        if k not in params and k not in defaults:
            return None
        out[k] = v
    if any(p not in out for p in params):
        return None
    return out


def normalize(node: torch.fx.Node) -> Call | None:
    """The canonical call of ``node``, or None when it is none we map."""
    if (
        node.op == "call_function"
        and node.target is builtins.getattr
        and len(node.args) == 2
        and node.args[1] in ("mT", "T")
    ):
        return Call("t" if node.args[1] == "T" else "mT", (node.args[0],))
    spelling = _spelling(node)
    if spelling is None:
        return None
    canonical, params, defaults = _SIGS[spelling]
    bound = _bind(params, defaults, node.args, node.kwargs)
    if bound is None:
        return None
    if spelling in ("float", "half", "bfloat16", "double"):
        bound["dtype"] = {
            "float": torch.float32,
            "half": torch.float16,
            "bfloat16": torch.bfloat16,
            "double": torch.float64,
        }[spelling]
    args = tuple(bound.pop(p) for p in params if p in bound)
    return Call(canonical, args, bound)


def example_value(node: torch.fx.Node) -> Any:
    """The fake (or real) value Dynamo or ShapeProp recorded for ``node``."""
    v = node.meta.get("example_value")
    if v is None:
        v = node.meta.get("val")
    return v


def user_line(node: torch.fx.Node) -> str:
    """``file:line: code`` of the user's source that produced ``node``, or ''."""
    st = node.meta.get("stack_trace") or ""
    lines = [s for s in st.splitlines() if s.strip()]
    for i in range(len(lines) - 1, -1, -1):
        s = lines[i].strip()
        if s.startswith("File "):
            parts = s.split(",")
            where = parts[0][5:].strip().strip('"')
            line = parts[1].strip().removeprefix("line ") if len(parts) > 1 else "?"
            code = lines[i + 1].strip() if i + 1 < len(lines) else ""
            return f"{where}:{line}: {code}"
    return ""
