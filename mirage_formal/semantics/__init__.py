"""Executable meanings of μGraphs: the float64 reference and (later) the prime-field one.

Both share :mod:`layout` (input iterators and output savers as reshapes, so a block graph is
evaluated for all blocks and loop iterations at once) and :mod:`evaluate` (the walk over
kernel and block graphs), and differ only in their op tables. May import ``ir``.
"""

from mirage_formal.semantics.evaluate import Semantics, evaluate, evaluate_block
from mirage_formal.semantics.reference import F64, random_inputs, run_reference

__all__ = ["F64", "Semantics", "evaluate", "evaluate_block", "random_inputs", "run_reference"]
