"""Signals and process lifetime for the search: SIGINT/SIGTERM become one exception the driver
handles (stop workers, write the checkpoint, tell the user how to resume), and worker
processes die with their parent.

* :func:`interrupt_handlers` installs, for the duration of a ``with`` block and only in the
  main thread, handlers that raise :class:`SearchInterrupted` (a ``KeyboardInterrupt``
  subclass, so code that already cleans up on Ctrl-C keeps working) for SIGINT and SIGTERM.
  :func:`as_interrupted` turns a plain ``KeyboardInterrupt`` caught in such a block back into
  the :class:`SearchInterrupted` of the signal that caused it (Ray replaces ours, see there).
* :func:`worker_initializer` runs first in every local pool worker: SIGINT is ignored (a
  terminal's Ctrl-C reaches the whole process group; only the parent decides), SIGTERM gets its
  default action back (the parent's handler was inherited through fork), and on Linux the
  kernel is asked (``prctl(PR_SET_PDEATHSIG, SIGKILL)``) to kill the worker when its parent
  dies, so a SIGKILLed driver leaves no orphans computing for nobody.

Imports nothing of ours.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType

#: ``PR_SET_PDEATHSIG`` from <linux/prctl.h>
_PR_SET_PDEATHSIG = 1


class SearchInterrupted(KeyboardInterrupt):
    """The search was stopped by SIGINT or SIGTERM (or a KeyboardInterrupt).

    ``exit_code`` is the shell convention 128 + signal number (130 for SIGINT, 143 for
    SIGTERM). The driver fills ``units_done``, ``units_total`` and ``checkpoint`` after it has
    written the checkpoint; :meth:`message` is the one line the command line prints.
    """

    def __init__(self, signum: int = signal.SIGINT) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)
        self.units_done = 0
        self.units_total = 0
        self.checkpoint: str | None = None

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    def message(self) -> str:
        if self.checkpoint is None:
            return (
                f"interrupted ({signal.Signals(self.signum).name}); no checkpoint was "
                "written (pass a checkpoint path to make a search resumable)"
            )
        where = os.path.dirname(self.checkpoint) or "."
        return (
            f"interrupted; {self.units_done} units saved to {where}; run the same command to resume"
        )


#: the signal the handlers of the current :func:`interrupt_handlers` block last raised for
_caught: int | None = None


def _raise(signum: int, frame: FrameType | None) -> None:
    global _caught
    _caught = int(signum)
    raise SearchInterrupted(signum)


def as_interrupted(e: KeyboardInterrupt) -> SearchInterrupted:
    """``e`` as a :class:`SearchInterrupted`: itself if it is one; else one for the signal our
    handler last raised for in the current block (SIGINT if none).

    A plain ``KeyboardInterrupt`` can stand for our SIGTERM: ``ray.wait``/``ray.get`` run
    signal handlers inside their own periodic check, catch any ``KeyboardInterrupt`` the
    handler raises and raise a new, plain one in its place, so without this a SIGTERM that
    arrives while the driver waits on Ray would read as Ctrl-C (exit 130, not 143)."""
    if isinstance(e, SearchInterrupted):
        return e
    return SearchInterrupted(signal.SIGINT if _caught is None else _caught)


@contextlib.contextmanager
def interrupt_handlers() -> Iterator[None]:
    """SIGINT and SIGTERM raise :class:`SearchInterrupted` inside the block (main thread only;
    elsewhere Python cannot install handlers and the block runs unchanged)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    global _caught
    _caught = None
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in old:
        signal.signal(s, _raise)
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def die_with_parent(parent_pid: int) -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux); exit now if the
    parent is already gone (it may have died before the request was made)."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent_pid:
        os._exit(0)


def worker_initializer(parent_pid: int) -> None:
    """The local pool's initializer (see the module doc)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    die_with_parent(parent_pid)
