"""Input iterators and output savers as pure array reshapes.

A block-level value is an array of shape ``(gx, gy, gz, F, *tile)`` where any of the four
leading axes may be 1 (broadcast) when the value does not depend on that grid axis or loop
iteration; accumulated values have F = 1. These functions are dtype-agnostic: the float64
and the prime-field interpreters both use them.

Imports ``ir`` only.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mirage_formal.ir.graph import GridT, MapT

#: number of leading (grid x, y, z, loop) axes of a block-level value
LEAD = 4
LOOP_AXIS = 3


def iterate(t: np.ndarray, imap: MapT, fmap: int, grid: GridT, forloop: int) -> np.ndarray:
    """The tiles every block sees at every iteration: shape (gx|1, gy|1, gz|1, F|1, *tile)."""
    new_shape: list[int] = []
    labels: list[tuple[str, int]] = []
    tile: list[int] = []
    for d, size in enumerate(t.shape):
        for a in range(3):
            if imap[a] == d:
                new_shape.append(grid[a])
                labels.append(("g", a))
                size //= grid[a]
        if fmap == d:
            new_shape.append(forloop)
            labels.append(("f", 0))
            size //= forloop
        new_shape.append(size)
        labels.append(("t", d))
        tile.append(size)
    r = t.reshape(new_shape)
    lead = [("g", 0), ("g", 1), ("g", 2), ("f", 0)]
    perm = [labels.index(lab) for lab in lead if lab in labels]
    perm += [i for i, lab in enumerate(labels) if lab[0] == "t"]
    r = r.transpose(perm)
    full = [grid[a] if ("g", a) in labels else 1 for a in range(3)]
    full.append(forloop if ("f", 0) in labels else 1)
    return r.reshape(*full, *tile)


def save(y: np.ndarray, omap: MapT, grid: GridT, tile: Sequence[int]) -> np.ndarray:
    """Concatenate per-block results (shape broadcastable to (gx, gy, gz, 1, *tile))."""
    rank = len(tile)
    y = np.broadcast_to(y, (*grid, 1, *tile))[:, :, :, 0]
    perm = [a for a in range(3) if omap[a] == -1]
    out: list[int] = []
    for d in range(rank):
        size = tile[d]
        for a in range(3):
            if omap[a] == d:
                perm.append(a)
                size *= grid[a]
        perm.append(3 + d)
        out.append(size)
    return np.ascontiguousarray(y.transpose(perm)).reshape(out)


def align(args: Sequence[np.ndarray], lead: int) -> list[np.ndarray]:
    """Give block-level operands equal rank by inserting unit axes right after the lead axes.

    This makes numpy's right-aligned broadcasting act on the tile dimensions only.
    """
    rank = max(a.ndim for a in args)
    out = []
    for a in args:
        if a.ndim < rank:
            a = a.reshape(*a.shape[:lead], *(1,) * (rank - a.ndim), *a.shape[lead:])
        out.append(a)
    return out
