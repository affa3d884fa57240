"""The typed steps of an emitted kernel: one value per loop over a tile's elements.

The emitter turns a block graph into a flat list of steps (each followed by a barrier when
printed): before the loop, accumulators are zeroed and loop-invariant tiles loaded; inside
it, per-iteration tiles are loaded and ops, accumulator updates and fused matmul-accumulates
run; after it, accumulators of loop-invariant tiles are computed, accumulators are finalised,
post-loop ops run and outputs are saved. A step
names the node (or output index) it computes; the printer dispatches on the step's type.

Imports ``ir`` only.
"""

from __future__ import annotations

from dataclasses import dataclass

from mirage_formal.ir.node import Node


@dataclass(frozen=True)
class Zero:
    """Set accumulator ``node``'s tile to 0 (before the loop)."""

    node: Node


@dataclass(frozen=True)
class Load:
    """Load iterator tile ``node`` from global memory (before the loop if loop-invariant)."""

    node: Node


@dataclass(frozen=True)
class Op:
    """Compute op ``node``'s tile (a matmul, reduction, rms_norm or stored elementwise op)."""

    node: Node


@dataclass(frozen=True)
class Accumulate:
    """Add this iteration's tile into accumulator ``node`` (squared for rms; folded)."""

    node: Node


@dataclass(frozen=True)
class MatmulAccumulate:
    """Matmul ``node`` adds its product straight into its (plain) accumulator."""

    node: Node


@dataclass(frozen=True)
class InvariantAccumulate:
    """Accumulator ``node`` of a loop-invariant tile, computed once after the loop: the tile
    (squared for rms) times the iterations the block ran, which is what the loop's additions
    would have summed (a mean or rms is then finalised as usual)."""

    node: Node


@dataclass(frozen=True)
class Finalize:
    """Turn accumulator ``node``'s sum into a mean or a root-mean-square (after the loop)."""

    node: Node


@dataclass(frozen=True)
class Save:
    """Write block output ``index`` to global memory."""

    index: int


Step = Zero | Load | Op | Accumulate | MatmulAccumulate | InvariantAccumulate | Finalize | Save

#: steps whose tile is defined by the step itself (they start a buffer's lifetime)
DEFINING = (Zero, Load, Op, Accumulate, InvariantAccumulate)  # (Accumulate: a one-iteration one)
