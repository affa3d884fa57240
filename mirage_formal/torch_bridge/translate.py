"""Translate a Dynamo FX graph into a mirage-formal program (a :class:`KernelGraph`).

The graph's placeholders become program inputs; its outputs, program outputs; every call in
between is mapped onto registry ops through the public builder (``mf.Graph`` methods), on
demand from the outputs, so a call nobody reads is never translated:

======================================  ==============================================
torch                                   program
======================================  ==============================================
``@``, matmul, bmm, mm                  ``matmul`` (batch dimensions broadcast)
``linear(x, W, b)``                     ``matmul(x, W.T) + b``; ``W.T`` is an input
``addmm(b, x, W)``, ``baddbmm``          ``matmul(x, W) + b`` (``beta``, ``alpha``: ``mul_scalar``)
``x.T``, ``.mT``, ``.t()``,             an input holding the transposed argument (only
``transpose(-2, -1)`` of an input       arguments and parameters; the registry has no
                                        transpose op)
``+ - * /`` of tensors                  ``add sub mul div`` (broadcasting)
``x * c``, ``c * x``, ``x / c``         ``mul_scalar``
``x + c``, ``c + x``, ``x - c``,         ``add_scalar`` (``c - x``: of ``neg(x)``)
``c - x``
``-x``, exp, silu, sigmoid, relu,       ``neg exp silu sigmoid relu sqrt rsqrt tanh``
sqrt, rsqrt, tanh
``torch.maximum`` of tensors            ``maximum`` (broadcasting)
``gelu(approximate="tanh")``            ``gelu``
``x ** 2``, square, pow(x, ±0.5)        ``square``, ``sqrt``, ``rsqrt``
``x ** 3``, ``x ** 4``                  ``mul(x, square(x))``, ``square(square(x))``
mean / sum over one dim (keepdim)       ``mean`` / ``sum`` with ``axis``, ``keepdims``
softmax(x, dim)                         ``e = exp(x); e / sum(e, dim, keepdims)``
``x * rsqrt(mean(x², -1) + eps)``,      ``rms_norm(x, eps=eps)`` (times the weight)
``F.rms_norm`` / ``nn.RMSNorm``
``F.layer_norm`` / ``nn.LayerNorm``     ``c = x - mean(x); c * rsqrt(mean(c²) + eps)``
over the last dimension                 (times the weight, plus the bias)
``F.scaled_dot_product_attention``      ``softmax(q @ kᵀ * scale [+ mask]) @ v``; ``kᵀ`` is an
(a float attn_mask; no dropout or       input (so k must be an argument of the region)
is_causal)
casts (``.float()``, ``.to(dtype)``)    nothing: kernels compute in fp32; the backend
                                        casts a region's outputs to torch's dtypes
contiguous, clone, detach               nothing
======================================  ==============================================

Anything else raises :class:`TorchOpError` naming the torch call and the user's source line.
Input dtypes: float16 -> f16, bfloat16 -> bf16, float32 and float64 -> f32 (the float64
reference ignores storage types, so float64 captures compare exactly with torch).

Imports torch, the IR builder and the errors.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx

from mirage_formal.errors import GraphError, UnsupportedOpError
from mirage_formal.ir.builder import Graph, Tensor
from mirage_formal.ir.dtypes import DType
from mirage_formal.ir.graph import KernelGraph
from mirage_formal.torch_bridge.torch_ops import Call, describe, example_value, normalize, user_line

SUPPORTED = (
    "matmul/@/bmm/mm, linear (weight transposed as an input), addmm/baddbmm, transpose of an input, "
    "+ - * / and maximum of tensors, multiply/divide by a Python scalar, neg, exp, silu, "
    "sigmoid, relu, tanh, gelu(approximate='tanh'), sqrt, rsqrt, square/pow 2 (3, 4), mean/sum over one dim, "
    "softmax, x*rsqrt(mean(x^2)+eps) and F.rms_norm (RMSNorm), F.layer_norm over the last "
    "dimension, scaled_dot_product_attention (float masks, no dropout), dtype casts, "
    "contiguous/clone"
)

_DTYPES = {
    torch.float16: DType.F16,
    torch.bfloat16: DType.BF16,
    torch.float32: DType.F32,
    torch.float64: DType.F32,
}

TORCH_DTYPE = {DType.F16: torch.float16, DType.BF16: torch.bfloat16, DType.F32: torch.float32}


class TorchOpError(UnsupportedOpError):
    """A torch call has no mapping onto the registry (names the call and the source line)."""

    def __init__(self, op: str, why: str, where: str) -> None:
        self.op = op
        self.why = why
        self.where = where
        at = f" at {where}" if where else ""
        super().__init__(
            f"{op}{at}: {why}. mirage-formal maps: {SUPPORTED}. Rewrite the call with those, "
            "or use mf.compile / torch.compile(backend='mirage_formal'), which runs unsupported "
            "calls with torch between superoptimized regions"
        )


@dataclass(frozen=True)
class InputBinding:
    """Program input ``name`` is graph argument ``arg`` (its last two dims swapped if
    ``transposed``)."""

    name: str
    arg: int
    transposed: bool = False


@dataclass(frozen=True)
class Translation:
    program: KernelGraph
    inputs: tuple[InputBinding, ...]
    out_dtypes: tuple[torch.dtype, ...]
    out_shapes: tuple[tuple[int, ...], ...]


def _error(node: torch.fx.Node, why: str) -> TorchOpError:
    return TorchOpError(describe(node), why, user_line(node))


def tensor_meta(node: torch.fx.Node) -> tuple[tuple[int, ...], torch.dtype]:
    """Static shape and dtype of ``node``'s value, or a clear error."""
    v = example_value(node)
    if not isinstance(v, torch.Tensor):
        raise _error(node, f"its value is a {type(v).__name__}, not a tensor")
    if any(not isinstance(s, int) for s in v.shape):
        raise _error(
            node,
            f"its shape {list(v.shape)} is symbolic; compile with static shapes "
            "(torch.compile(..., dynamic=False), which mf.compile does)",
        )
    return tuple(int(s) for s in v.shape), v.dtype


def program_dtype(node: torch.fx.Node) -> DType:
    _, dt = tensor_meta(node)
    if dt not in _DTYPES:
        raise _error(
            node, f"dtype {dt} has no program type (use float16, bfloat16, float32 or float64)"
        )
    return _DTYPES[dt]


class Translator:
    """Builds one program from one FX graph; ``names[i]`` names placeholder ``i``."""

    def __init__(self, gm: torch.fx.GraphModule, names: Sequence[str]) -> None:
        self.gm = gm
        self.placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        if len(names) != len(self.placeholders):
            raise GraphError(f"{len(names)} names for {len(self.placeholders)} graph arguments")
        self.names = list(names)
        self.g = Graph()
        self.memo: dict[torch.fx.Node, Tensor] = {}
        self.transposed: dict[torch.fx.Node, Tensor] = {}
        self.bindings: list[InputBinding] = []

    # ------------------------------------------------------------ inputs
    def _input(self, node: torch.fx.Node, transposed: bool) -> Tensor:
        i = self.placeholders.index(node)
        shape, _ = tensor_meta(node)
        dt = program_dtype(node)
        name = self.names[i]
        if transposed:
            if len(shape) < 2:
                raise _error(node, f"a rank-{len(shape)} tensor cannot be transposed")
            shape = (*shape[:-2], shape[-1], shape[-2])
            name = f"{name}.T"
        used = {b.name for b in self.bindings}
        base, k = name, 1
        while name in used:
            name, k = f"{base}_{k}", k + 1
        if not shape:
            raise _error(
                node,
                "a 0-dimensional tensor cannot be a program input; pass a Python "
                "scalar or a tensor of shape [1]",
            )
        t = self.g.input(shape, dt, name)
        self.bindings.append(InputBinding(name, i, transposed))
        return t

    def transposed_input(self, operand: Any, node: torch.fx.Node) -> Tensor:
        """The program input holding ``operand``'s transpose (``operand`` must be an argument)."""
        if not isinstance(operand, torch.fx.Node) or operand.op != "placeholder":
            raise _error(
                node,
                "it transposes a computed tensor; the registry has no transpose "
                "op, so only graph arguments and parameters (transposed once, "
                "outside the program) may be transposed",
            )
        t = self.transposed.get(operand)
        if t is None:
            t = self.transposed[operand] = self._input(operand, transposed=True)
        return t

    # ------------------------------------------------------------ values
    def value(self, node: Any, user: torch.fx.Node) -> Tensor:
        if not isinstance(node, torch.fx.Node):
            raise _error(user, f"operand {node!r} is not a tensor where a tensor is needed")
        t = self.memo.get(node)
        if t is None:
            if node.op == "placeholder":
                t = self._input(node, transposed=False)
            else:
                t = self._call(node)
                shape, _ = tensor_meta(node)
                if t.shape != shape:
                    raise GraphError(
                        f"translating {describe(node)} at {user_line(node)} gave shape "
                        f"{list(t.shape)}, torch has {list(shape)} (a mirage-formal bug)"
                    )
            self.memo[node] = t
        return t

    def _call(self, node: torch.fx.Node) -> Tensor:
        c = normalize(node)
        if c is None:
            raise _error(node, "the op registry has no such op")
        rms = self._rms_norm(node, c)
        if rms is not None:
            return rms
        handler = getattr(self, f"_op_{c.name}")
        out: Tensor = handler(node, c)
        return out

    # ------------------------------------------------------------ ops
    def _unary(self, node: torch.fx.Node, c: Call) -> Tensor:
        if c.opts.get("inplace"):
            raise _error(node, "in-place calls are not captured; drop inplace=True")
        return self.g.op(c.name, self.value(c.args[0], node))

    _op_neg = _op_exp = _op_silu = _op_sigmoid = _op_relu = _op_sqrt = _op_rsqrt = _unary
    _op_square = _op_tanh = _unary

    def _op_gelu(self, node: torch.fx.Node, c: Call) -> Tensor:
        if c.opts.get("approximate") != "tanh":
            raise _error(
                node,
                "the registry's gelu is the tanh approximation; write "
                "F.gelu(x, approximate='tanh')",
            )
        return self.g.gelu(self.value(c.args[0], node))

    def _op_identity(self, node: torch.fx.Node, c: Call) -> Tensor:
        return self.value(c.args[0], node)

    def _op_cast(self, node: torch.fx.Node, c: Call) -> Tensor:
        target = c.args[1] if len(c.args) > 1 else c.opts.get("dtype")
        if isinstance(target, torch.fx.Node):
            target = tensor_meta(target)[1]
        if not isinstance(target, torch.dtype) or target not in _DTYPES:
            raise _error(
                node, f"only casts between floating dtypes are captured, not to {target!r}"
            )
        return self.value(c.args[0], node)

    def _op_t(self, node: torch.fx.Node, c: Call) -> Tensor:
        shape, _ = tensor_meta(c.args[0]) if isinstance(c.args[0], torch.fx.Node) else ((), None)
        if len(shape) != 2:
            raise _error(node, "t()/T is captured for matrices only; use .mT or transpose(-2, -1)")
        return self.transposed_input(c.args[0], node)

    def _op_mT(self, node: torch.fx.Node, c: Call) -> Tensor:
        return self.transposed_input(c.args[0], node)

    def _op_transpose(self, node: torch.fx.Node, c: Call) -> Tensor:
        x, d0, d1 = c.args
        rank = len(tensor_meta(x)[0]) if isinstance(x, torch.fx.Node) else 0
        if rank < 2 or sorted((int(d0) % rank, int(d1) % rank)) != [rank - 2, rank - 1]:
            raise _error(
                node,
                "only a swap of the last two dimensions is captured (the registry "
                "has no transpose or permute op)",
            )
        return self.transposed_input(x, node)

    def _op_matmul(self, node: torch.fx.Node, c: Call) -> Tensor:
        a, b = c.args
        for x in (a, b):
            if isinstance(x, torch.fx.Node) and len(tensor_meta(x)[0]) < 2:
                raise _error(
                    node,
                    "matrix-vector products (a rank-1 operand) are not captured; "
                    "give the vector a dimension of size 1",
                )
        return self.g.matmul(self.value(a, node), self.value(b, node))

    def _op_linear(self, node: torch.fx.Node, c: Call) -> Tensor:
        x, w, bias = c.args
        y = self.g.matmul(self.value(x, node), self.transposed_input(w, node))
        if bias is not None:
            y = self.g.add(y, self.value(bias, node))
        return y

    def _op_addmm(self, node: torch.fx.Node, c: Call) -> Tensor:
        """addmm / baddbmm: beta * input + alpha * (mat1 @ mat2), a Python-number beta and alpha
        (GPT-2's Conv1D layers are addmm calls)."""
        bias, a, b = c.args
        beta, alpha = c.opts.get("beta", 1), c.opts.get("alpha", 1)
        y = self._op_matmul(node, Call("matmul", (a, b)))
        if alpha != 1:
            y = self.g.mul_scalar(y, scalar=_scalar(alpha, node))
        if beta == 0:
            return y
        if not isinstance(bias, torch.fx.Node):
            return self.g.add_scalar(y, scalar=_scalar(bias, node) * _scalar(beta, node))
        t = self.value(bias, node)
        if beta != 1:
            t = self.g.mul_scalar(t, scalar=_scalar(beta, node))
        return self.g.add(y, t)

    def _binary(self, node: torch.fx.Node, c: Call) -> Tensor:
        a, b = c.args
        if c.opts.get("alpha", 1) != 1:
            raise _error(node, "alpha != 1 is not captured; multiply the operand instead")
        if c.opts.get("rounding_mode") is not None:
            raise _error(node, "rounding division is not in the registry")
        sa, sb = (not isinstance(x, torch.fx.Node) for x in (a, b))
        if c.name == "mul" and (sa or sb):
            scalar, t = (a, b) if sa else (b, a)
            return self.g.mul_scalar(self.value(t, node), scalar=_scalar(scalar, node))
        if c.name == "div" and sb and not sa:
            return self.g.mul_scalar(self.value(a, node), scalar=1.0 / _scalar(b, node))
        if c.name in ("add", "sub") and (sa or sb) and not (sa and sb):
            scalar, t = (a, b) if sa else (b, a)
            v, k = self.value(t, node), _scalar(scalar, node)
            if c.name == "sub":
                # x - c = x + (-c); c - x = (-x) + c
                v, k = (self.g.neg(v), k) if sa else (v, -k)
            return self.g.add_scalar(v, scalar=k)
        if sa or sb:
            raise _error(
                node,
                "a Python scalar operand is captured only in x * c, c * x, x / c, x + c, c + x, "
                "x - c and c - x (the registry has no reciprocal op)",
            )
        return self.g.op(c.name, self.value(a, node), self.value(b, node))

    _op_add = _op_sub = _op_mul = _op_div = _op_maximum = _binary

    def _op_pow(self, node: torch.fx.Node, c: Call) -> Tensor:
        x, e = c.args
        ops = {2: "square", 0.5: "sqrt", -0.5: "rsqrt"}
        if isinstance(e, torch.fx.Node) or (e not in ops and e not in (1, 3, 4)):
            raise _error(node, f"pow with exponent {e!r} is not captured (1, 2, 3, 4, 0.5 and "
                               "-0.5 are)")
        v = self.value(x, node)
        if e == 1:
            return v
        if e == 3:  # (GPT-2's gelu_new writes torch.pow(x, 3.0))
            return self.g.mul(v, self.g.square(v))
        if e == 4:
            return self.g.square(self.g.square(v))
        return self.g.op(ops[e], v)

    def _reduce(self, node: torch.fx.Node, c: Call) -> Tensor:
        x = c.args[0]
        dim, keep = c.args[1], bool(c.args[2])
        if isinstance(dim, (list, tuple)) and len(dim) == 1:
            dim = dim[0]
        if not isinstance(dim, int):
            raise _error(
                node,
                f"{c.name} over dim={dim!r} is not captured; reduce over one "
                "dimension (dim=-1, keepdim=True)",
            )
        return self.g.op(c.name, self.value(x, node), axis=dim, keepdims=keep)

    _op_mean = _op_sum = _reduce

    def _op_softmax(self, node: torch.fx.Node, c: Call) -> Tensor:
        x, dim = c.args
        if not isinstance(dim, int):
            raise _error(node, "softmax needs an explicit dim")
        e = self.g.exp(self.value(x, node))
        return self.g.div(e, self.g.sum(e, axis=dim, keepdims=True))

    def _normalized_last(self, node: torch.fx.Node, c: Call) -> Tensor:
        """The operand of a layer_norm / rms_norm call that normalises its last dimension."""
        x, shape = c.args[0], c.args[1]
        dims = tuple(shape) if isinstance(shape, (list, tuple, torch.Size)) else (shape,)
        xs = tensor_meta(x)[0] if isinstance(x, torch.fx.Node) else ()
        if len(dims) != 1 or not xs or int(dims[0]) != xs[-1]:
            raise _error(node, f"{c.name} over normalized_shape={list(dims)} is not captured; "
                               "normalise the last dimension only")
        return self.value(x, node)

    def _scaled(self, node: torch.fx.Node, y: Tensor, weight: Any, bias: Any = None) -> Tensor:
        if weight is not None:
            y = self.g.mul(y, self.value(weight, node))
        if bias is not None:
            y = self.g.add(y, self.value(bias, node))
        return y

    def _op_layer_norm(self, node: torch.fx.Node, c: Call) -> Tensor:
        x = self._normalized_last(node, c)
        _, _, weight, bias, eps = c.args
        mu = self.g.mean(x, axis=-1, keepdims=True)
        centred = self.g.sub(x, mu)
        var = self.g.mean(self.g.square(centred), axis=-1, keepdims=True)
        y = self.g.mul(centred, self.g.rsqrt(self.g.add_scalar(var, scalar=_scalar(eps, node))))
        return self._scaled(node, y, weight, bias)

    def _op_rms_norm_call(self, node: torch.fx.Node, c: Call) -> Tensor:
        x = self._normalized_last(node, c)
        _, _, weight, eps = c.args
        if eps is None:  # (torch's default: the machine epsilon of the input's dtype)
            eps = torch.finfo(tensor_meta(c.args[0])[1]).eps
        return self._scaled(node, self.g.rms_norm(x, eps=_scalar(eps, node)), weight)

    def _op_sdpa(self, node: torch.fx.Node, c: Call) -> Tensor:
        q, k, v, mask, dropout, causal, scale = c.args
        if causal or dropout or c.opts.get("enable_gqa"):
            raise _error(node, "scaled_dot_product_attention is captured without is_causal, "
                               "dropout_p and enable_gqa only (pass a causal mask as a float "
                               "attn_mask instead)")
        if isinstance(mask, torch.fx.Node) and not tensor_meta(mask)[1].is_floating_point:
            raise _error(node, "a boolean attn_mask is not captured (the registry has no select); "
                               "pass an additive float mask (0 and -inf)")
        qs = tensor_meta(q)[0] if isinstance(q, torch.fx.Node) else ()
        if not qs:
            raise _error(node, f"operand {q!r} is not a tensor where a tensor is needed")
        k_t = self.transposed_input(k, node)
        s = self.g.mul_scalar(self.g.matmul(self.value(q, node), k_t),
                              scalar=_scalar(1.0 / math.sqrt(qs[-1]) if scale is None else scale,
                                             node))
        if mask is not None:  # (a float mask is added to the scores)
            s = self.g.add(s, self.value(mask, node))
        e = self.g.exp(s)
        return self.g.matmul(self.g.div(e, self.g.sum(e, axis=-1, keepdims=True)),
                             self.value(v, node))

    # ------------------------------------------------------------ RMSNorm
    def _rms_norm(self, node: torch.fx.Node, c: Call) -> Tensor | None:
        """``x * rsqrt(mean(x², -1, keepdim) [+ eps])`` (or ``x / sqrt(...)``) as rms_norm."""
        m = match_rms_norm(node, c)
        if m is None:
            return None
        x, eps, _ = m
        return self.g.rms_norm(self.value(x, node), eps=eps)

    # ------------------------------------------------------------ whole graphs
    def run(self) -> Translation:
        (out,) = [n for n in self.gm.graph.nodes if n.op == "output"]
        results = out.args[0]
        if not isinstance(results, (tuple, list)):
            results = (results,)
        dts, shapes = [], []
        for r in results:
            if not isinstance(r, torch.fx.Node):
                raise _error(out, f"an output is {r!r}, not a tensor")
            if r.op == "placeholder":
                raise _error(
                    out,
                    f"output {r.name} is an argument returned unchanged; there is "
                    "nothing to compute for it",
                )
            self.g.output(self.value(r, out))
            shape, dt = tensor_meta(r)
            dts.append(dt)
            shapes.append(shape)
        return Translation(self.g.build(), tuple(self.bindings), tuple(dts), tuple(shapes))


def _scalar(v: Any, node: torch.fx.Node) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise _error(node, f"scalar operand {v!r} must be a finite Python number")
    return float(v)


def _strip(n: Any) -> Any:
    """Skip casts and identities (``x.float()`` is the same value as ``x`` for matching)."""
    while isinstance(n, torch.fx.Node):
        c = normalize(n)
        if c is None or c.name not in ("cast", "identity"):
            break
        n = c.args[0]
    return n


def match_rms_norm(
    node: torch.fx.Node, c: Call
) -> tuple[torch.fx.Node, float, list[torch.fx.Node]] | None:
    """If ``node`` is x·rsqrt(mean(x², -1) + eps) or x / sqrt(...): (x, eps, inner nodes)."""
    if c.name not in ("mul", "div") or len(c.args) != 2:
        return None
    want = "rsqrt" if c.name == "mul" else "sqrt"
    pairs = [(c.args[0], c.args[1])] + ([(c.args[1], c.args[0])] if c.name == "mul" else [])
    for x, r in pairs:
        if not isinstance(x, torch.fx.Node) or not isinstance(r, torch.fx.Node):
            continue
        rc = normalize(r)
        if rc is None or rc.name != want:
            continue
        inner: list[torch.fx.Node] = [r]
        m, eps = rc.args[0], 0.0
        mc = normalize(m) if isinstance(m, torch.fx.Node) else None
        if (
            mc is not None
            and mc.name == "add"
            and isinstance(mc.args[1], (int, float))
            and mc.opts.get("alpha", 1) == 1
        ):
            inner.append(m)
            eps, m = float(mc.args[1]), mc.args[0]
            mc = normalize(m) if isinstance(m, torch.fx.Node) else None
        if mc is None or mc.name != "mean" or not isinstance(m, torch.fx.Node):
            continue
        dim, keep = mc.args[1], mc.args[2]
        if isinstance(dim, (list, tuple)) and len(dim) == 1:
            dim = dim[0]
        rank = len(tensor_meta(m)[0])
        if not keep or not isinstance(dim, int) or dim % rank != rank - 1:
            continue
        inner.append(m)
        sq = mc.args[0]
        sc = normalize(sq) if isinstance(sq, torch.fx.Node) else None
        if sc is None:
            continue
        if (
            sc.name == "square"
            or (sc.name == "pow" and sc.args[1] == 2)
            or (sc.name == "mul" and _strip(sc.args[0]) is _strip(sc.args[1]))
        ):
            base = sc.args[0]
        else:
            continue
        inner.append(sq)
        if _strip(base) is _strip(x):
            return x, eps, inner
    return None
