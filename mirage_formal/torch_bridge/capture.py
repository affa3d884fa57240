"""``from_torch``: capture a PyTorch function or module as a mirage-formal program.

    cap = mf.from_torch(layer, x, k_cache, v_cache)
    cap.program            # a KernelGraph: superoptimize it, verify against it, print it
    cap.inputs             # program input name -> where its value comes from
    cap.parameters         # program input name -> the module's parameter/buffer name
    cap.arguments(x, k_cache, v_cache)   # the program's inputs as float64 numpy arrays

Capture runs TorchDynamo once on the example inputs (``fullgraph=True``, static shapes) with a
backend that only records the FX graph, so what is captured is exactly what torch.compile would
see. A module's parameters and buffers arrive as graph arguments; they are matched to their
qualified names by identity. :mod:`translate` maps the graph onto registry ops.

Imports torch, ``translate`` and ``ir``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.fx

from mirage_formal.errors import MirageError
from mirage_formal.ir.graph import KernelGraph
from mirage_formal.torch_bridge.translate import InputBinding, Translation, Translator


class CaptureError(MirageError):
    """Dynamo could not trace the function into one graph."""


@dataclass(frozen=True)
class Source:
    """Where a program input's value comes from: positional argument ``arg`` of the call, or
    the module's parameter/buffer ``attr``; ``transposed``: its last two dims swapped."""

    kind: str  # "argument", "parameter", "buffer" or "constant"
    label: str  # the argument's name, or the qualified attribute name
    arg: int | None = None
    transposed: bool = False


@dataclass(frozen=True)
class Captured:
    """A captured program and how its inputs bind to the torch call."""

    program: KernelGraph
    inputs: dict[str, Source]
    translation: Translation
    tensors: tuple[torch.Tensor, ...]  # the graph's arguments at capture (parameters included)

    @property
    def parameters(self) -> dict[str, str]:
        """Program input name -> qualified parameter or buffer name (module captures)."""
        return {k: s.label for k, s in self.inputs.items() if s.kind in ("parameter", "buffer")}

    def input_tensors(self, *args: torch.Tensor) -> list[torch.Tensor]:
        """The program's inputs, in order, for a call with positional arguments ``args``
        (parameters, buffers and constants as captured)."""
        out = []
        for name, s in self.inputs.items():
            if s.kind == "argument":
                if s.arg is None or s.arg >= len(args):
                    raise MirageError(
                        f"input {name!r} is positional argument {s.arg}; got {len(args)} arguments"
                    )
                t = args[s.arg]
            else:
                t = self.tensors[self._binding(name).arg]
            out.append(t.mT if s.transposed else t)
        return out

    def arguments(self, *args: torch.Tensor) -> list[np.ndarray]:
        """:meth:`input_tensors` as float64 numpy arrays (for ``mf.run_reference``)."""
        return [
            t.detach().to("cpu", torch.float64).contiguous().numpy()
            for t in self.input_tensors(*args)
        ]

    def _binding(self, name: str) -> InputBinding:
        return next(b for b in self.translation.inputs if b.name == name)


def _record_graph(
    fn: Callable[..., Any], args: Sequence[Any]
) -> tuple[torch.fx.GraphModule, list[Any]]:
    seen: list[tuple[torch.fx.GraphModule, list[Any]]] = []

    def backend(gm: torch.fx.GraphModule, example_inputs: list[Any], **_: Any) -> Any:
        seen.append((gm, list(example_inputs)))
        return gm.forward

    compiled = torch.compile(fn, backend=backend, fullgraph=True, dynamic=False)
    try:
        with torch._dynamo.config.patch(recompile_limit=1 << 16), torch.no_grad():
            compiled(*args)
    except torch._dynamo.exc.Unsupported as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CaptureError(
            f"TorchDynamo cannot trace this function into one graph: {first}. "
            "Remove data-dependent control flow and Python side effects, or "
            "use mf.compile, which tolerates graph breaks"
        ) from e
    if not seen:
        raise CaptureError(
            "TorchDynamo did not produce a graph (was it disabled, or is the "
            "function already compiled?)"
        )
    return seen[-1]


def _arg_names(fn: Callable[..., Any], n: int) -> list[str]:
    target = fn.forward if isinstance(fn, torch.nn.Module) else fn
    try:
        params = [
            p.name
            for p in inspect.signature(target).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        params = []
    return [params[i] if i < len(params) else f"arg{i}" for i in range(n)]


def name_sources(
    fn: Callable[..., Any], args: Sequence[Any], graph_args: Sequence[Any]
) -> list[Source]:
    """Name each graph argument: a call argument, a parameter, a buffer, or a constant."""
    by_id: dict[int, tuple[str, str]] = {}
    if isinstance(fn, torch.nn.Module):
        for k, p in fn.named_parameters(remove_duplicate=False):
            by_id.setdefault(id(p), ("parameter", k))
        for k, b in fn.named_buffers(remove_duplicate=False):
            by_id.setdefault(id(b), ("buffer", k))
    arg_names = _arg_names(fn, len(args))
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor):
            by_id[id(a)] = ("argument", arg_names[i])
    out: list[Source] = []
    for j, t in enumerate(graph_args):
        kind, label = by_id.get(id(t), ("constant", f"const{j}"))
        arg = next((i for i, a in enumerate(args) if a is t), None) if kind == "argument" else None
        out.append(Source(kind, label, arg))
    return out


def from_torch(fn: Callable[..., Any], *example_inputs: Any) -> Captured:
    """Capture ``fn`` (a function or ``nn.Module``) on ``example_inputs`` as a program.

    Raises :class:`TorchOpError` for a torch call the registry cannot express (naming the call
    and the source line) and :class:`CaptureError` when Dynamo cannot trace ``fn`` whole.
    """
    if not callable(fn):
        raise MirageError(f"from_torch takes a function or nn.Module, not {type(fn).__name__}")
    gm, graph_args = _record_graph(fn, example_inputs)
    sources = name_sources(fn, example_inputs, graph_args)
    tr = Translator(gm, [s.label for s in sources]).run()
    inputs = {
        b.name: Source(sources[b.arg].kind, sources[b.arg].label, sources[b.arg].arg, b.transposed)
        for b in tr.inputs
    }
    return Captured(tr.program, inputs, tr, tuple(graph_args))
