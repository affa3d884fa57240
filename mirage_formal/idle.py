"""How many of this machine's search workers sit idle right now.

A search on a process pool (``search.executors.local``) ends with a tail: the queue of units is
empty, most workers wait, and one or two long units still run — on 16 cores, mqa b=8's unit
158 verified 13 candidates of 8 x 1024 x 4096 score tiles in the field for 59 s while the
other 13 workers had nothing left to do. The pool installs a counter of busy workers that its
forked workers share (:func:`install`, :func:`busy`); the verifier asks :func:`spare` how many
workers are idle and evaluates that many more of a candidate's trials at once, in threads
(numpy releases the interpreter lock in the field's large array operations). Outside such a
pool nothing is installed and :func:`spare` is 0: one trial at a time, as always.

Imports nothing of ours.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

#: the shared counter (a multiprocessing Value of busy workers) and the pool's size
_POOL: tuple[Any, int] | None = None


def install(counter: Any, workers: int) -> None:
    """Publish the pool's busy-worker counter (before the workers fork: they inherit it)."""
    global _POOL
    _POOL = (counter, workers)


def uninstall() -> None:
    global _POOL
    _POOL = None


@contextlib.contextmanager
def busy() -> Iterator[None]:
    """Count this worker as busy while the block runs (a unit of the search)."""
    pool = _POOL
    if pool is None:
        yield
        return
    counter, _ = pool
    with counter.get_lock():
        counter.value += 1
    try:
        yield
    finally:
        with counter.get_lock():
            counter.value -= 1


def spare() -> int:
    """Workers of the pool that run nothing now (0 outside a pool)."""
    pool = _POOL
    if pool is None:
        return 0
    counter, workers = pool
    return max(0, workers - int(counter.value))
