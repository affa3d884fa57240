"""The two predicates the search is handed, as Protocols the search owns.

``search`` never imports ``formal`` or ``verify``: ``optimize`` passes a :class:`Pruner`
(``formal.Oracle``) and a :class:`Checker` (``verify.Verifier``). :class:`KeepAll` is the
trivial pruner (the "no pruning" arm of the ablation). Development stand-ins that need the
float64 interpreter live outside this package (tests and benchmarks), because ``search``
imports only ``ir``.

Imports ``ir`` only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from mirage_formal.ir.graph import KernelGraph
from mirage_formal.ir.node import Node


@runtime_checkable
class Pruner(Protocol):
    """Decides whether a new tensor of a partial μGraph may lead to the reference.

    ``node`` is either a kernel-level node of a partial kernel graph (``kernel_inputs`` is
    None), or a block-level node of a partial block graph inside a graph-defined kernel whose
    inputs are the kernel-level nodes ``kernel_inputs`` (an iter node's attribute ``input``
    indexes that list), with that ``grid`` and ``forloop``. False prunes the subtree.
    """

    def keep(self, node: Node, kernel_inputs: Sequence[Node] | None = None,
             grid: tuple[int, int, int] | None = None, forloop: int | None = None) -> bool: ...


@runtime_checkable
class Checker(Protocol):
    """Decides whether a complete candidate computes the reference program.

    Returns a verdict object with a bool attribute ``accepted`` (other attributes, such as a
    bound or evidence, are kept with the accepted μGraph and reported).
    """

    def check(self, candidate: KernelGraph) -> Any: ...


class KeepAll:
    """The pruner that prunes nothing (the unpruned arm of the ablation)."""

    def keep(self, node: Node, kernel_inputs: Sequence[Node] | None = None,
             grid: tuple[int, int, int] | None = None, forloop: int | None = None) -> bool:
        return True

    def __repr__(self) -> str:
        return "KeepAll()"


class Chain:
    """A checker that asks several checkers in order and stops at the first rejection.

    Put a cheap test first (a float64 comparison rejects most wrong candidates in a fraction
    of a field check's time) and the deciding checker last; the verdict returned is the first
    rejecting one, or the last checker's.
    """

    def __init__(self, *checkers: Checker) -> None:
        if not checkers:
            raise ValueError("Chain needs at least one checker")
        self.checkers = checkers

    def set_deadline(self, deadline: float | None) -> None:
        """Hand ``deadline`` to every checker of the chain that takes one."""
        for c in self.checkers:
            f = getattr(c, "set_deadline", None)
            if callable(f):
                f(deadline)

    def check(self, candidate: KernelGraph) -> Any:
        verdict: Any = None
        for c in self.checkers:
            verdict = c.check(candidate)
            if not getattr(verdict, "accepted", False):
                return verdict
        return verdict
