"""mirage-formal: a superoptimizer for tensor programs.

The public API is this explicit re-export list. Layering (arrows point to what a package may
import): ``ir`` <- ``semantics`` <- ``formal``, ``verify``; ``ir`` <- ``search`` (handed a
pruner and a checker through its own Protocols); ``ir`` <- ``codegen``; ``optimize`` wires
search, verify and codegen; ``cli`` sits on top. ``torch_bridge`` (``from_torch``,
``compile``) imports torch only when called.
"""

from mirage_formal import workloads
from mirage_formal.errors import (
    FormatError,
    GraphError,
    MirageError,
    ResourceError,
    UnsupportedOpError,
)
from mirage_formal.ir import REGISTRY, BlockGraph, DType, Graph, KernelGraph, Node, Tensor
from mirage_formal.optimize import OptimizeResult, superoptimize
from mirage_formal.semantics import random_inputs, run_reference
from mirage_formal.torch_bridge import compile, from_torch
from mirage_formal.verify import Verdict, Verifier, verify

__version__ = "0.1.0"

__all__ = [
    "REGISTRY",
    "BlockGraph",
    "DType",
    "FormatError",
    "Graph",
    "GraphError",
    "KernelGraph",
    "MirageError",
    "Node",
    "OptimizeResult",
    "ResourceError",
    "Tensor",
    "UnsupportedOpError",
    "Verdict",
    "Verifier",
    "__version__",
    "compile",
    "from_torch",
    "random_inputs",
    "run_reference",
    "superoptimize",
    "verify",
    "workloads",
]
