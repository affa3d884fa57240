"""The μGraph IR: dtypes, interned nodes, the op registry, kernel and block graphs, the
builder API, and the text and JSON forms. Imports nothing of ours outside ``ir`` but the
errors."""

from mirage_formal.ir.builder import Graph, KernelBuilder, Tensor
from mirage_formal.ir.dtypes import DType, as_dtype
from mirage_formal.ir.graph import BlockGraph, BlockOutput, KernelGraph
from mirage_formal.ir.node import Node
from mirage_formal.ir.ops import REGISTRY, OpDef, get_op

__all__ = ["REGISTRY", "BlockGraph", "BlockOutput", "DType", "Graph", "KernelBuilder",
           "KernelGraph", "Node", "OpDef", "Tensor", "as_dtype", "get_op"]
