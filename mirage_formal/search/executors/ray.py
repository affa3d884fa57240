"""The Ray executor: every work unit is a Ray task on a Ray cluster.

What runs where. The driver (this process) enumerates the units, puts the :class:`Job` into
Ray's object store once (``ray.put``) and submits one task per unit, at most ``workers`` at a
time, in the enumerator's order, so that a budget stop leaves no queue of tasks behind and the
driver decides, unit by unit, what still gets dispatched. A task runs
:func:`~mirage_formal.search.executors.unit.run_unit` in a Ray worker process; the first task of
a job in a worker builds the pruner and the checker there (``Job.components``: the Z3 oracle,
its e-graph and caches, the verifier) and keeps them for the job's later tasks in that worker.
Only the job (plain data and a picklable recipe) goes out and only
:class:`~mirage_formal.search.executors.unit.UnitResult` (statistics and accepted μGraphs)
comes back.

Faults. A task whose worker process dies (killed, out of memory, node lost) is retried by Ray
(``max_retries``) from the unit's start; results of the dead attempt never reach the driver, so
nothing is counted twice. Exceptions raised by our code are not retried (they would recur) and
are re-raised in the driver. At the hard deadline, or on SIGINT/SIGTERM, tasks still running
are cancelled with ``force=True`` (their worker processes are killed); tasks already finished
are not (:func:`_cancel_running` says why).

Cluster. ``address`` None: ``ray.init()`` (connects to ``RAY_ADDRESS`` or a cluster started
on this machine with ``ray start``, else starts one here); ``"local"``: always start one here
with ``workers`` CPUs; anything else is passed to ``ray.init(address=...)``. A cluster started
here is shut down at the end; a cluster we connected to is left running (we only disconnect).

Imports ``ray`` (the optional extra) and ``search`` only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from mirage_formal.errors import MirageError
from mirage_formal.search.executors import OnResult
from mirage_formal.search.executors.unit import Job, UnitResult, run_unit

try:
    import ray
except ImportError:  # pragma: no cover - exercised only without the extra
    raise MirageError(
        "the Ray executor needs Ray: install the optional extra with "
        "`pip install 'mirage-formal[ray]'` (or run without --ray)"
    ) from None

#: retries of a task whose worker process died (Ray's system failures only)
MAX_RETRIES = 3

HARD_STOP = "time budget spent (Ray tasks still running at the deadline were cancelled)"


def _remote_unit(job: Job, index: int) -> UnitResult:
    return run_unit(job, index, f"{socket.gethostname()} pid {os.getpid()}")


_unit_task = ray.remote(num_cpus=1, max_retries=MAX_RETRIES, retry_exceptions=False)(_remote_unit)


@contextlib.contextmanager
def _keeping_sigterm_handler() -> Iterator[None]:
    """Around ``ray.init``: give SIGTERM back to the handler it had before.

    ``ray.init`` installs its own SIGTERM handler in the main thread (``sys.exit(15)``; a Ray
    instance it starts, one that kills the instance and exits 1). Left in place, it would
    replace the driver's (:func:`~mirage_formal.search.signals.interrupt_handlers`) for the
    rest of the search, and a scheduler's SIGTERM would end the command with exit code 15,
    without the checkpoint line. A SIGTERM that Ray's first handler takes during ``ray.init``
    itself is handed on to the previous handler."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.getsignal(signal.SIGTERM)
    try:
        yield
    except SystemExit as e:
        if e.code == signal.SIGTERM and callable(before):
            before(signal.SIGTERM, None)
        raise
    finally:
        if before is not None:
            signal.signal(signal.SIGTERM, before)


class RayExecutor:
    """Runs units as Ray tasks (see the module doc)."""

    name = "ray"

    def __init__(self, address: str | None, workers: int | None) -> None:
        self.address = address
        self.requested = workers
        self.workers = workers or 0
        self.info: dict[str, Any] = {}

    def _connect(self) -> bool:
        """Initialize Ray unless it already is; True when this call started it."""
        if ray.is_initialized():
            return False
        kw: dict[str, Any] = {
            "include_dashboard": False,
            "log_to_driver": False,
            "configure_logging": False,
        }
        try:
            with _keeping_sigterm_handler():
                if self.address == "local":
                    ray.init(address="local", num_cpus=self.requested or None, **kw)
                else:
                    ray.init(address=self.address, **kw)
        except (ConnectionError, ValueError, RuntimeError) as e:
            raise MirageError(
                f"cannot reach the Ray cluster at {self.address or 'RAY_ADDRESS/local'}: "
                f"{e}; start one with `ray start --head` or pass --ray local"
            ) from None
        return True

    def run(
        self,
        job: Job,
        todo: Sequence[int],
        on_result: OnResult,
        soft_deadline: float | None,
        hard_deadline: float | None,
    ) -> str | None:
        started = self._connect()
        try:
            cpus = int(ray.cluster_resources().get("CPU", 1))
            self.workers = self.requested or max(1, cpus)
            self.info = {
                "ray": ray.__version__,
                "cluster_cpus": cpus,
                "nodes": len([n for n in ray.nodes() if n.get("Alive")]),
            }
            return self._run(job, todo, on_result, soft_deadline, hard_deadline)
        finally:
            if started:
                ray.shutdown()

    def _run(
        self,
        job: Job,
        todo: Sequence[int],
        on_result: OnResult,
        soft_deadline: float | None,
        hard_deadline: float | None,
    ) -> str | None:
        try:
            job_ref = ray.put(job)
        except Exception as e:  # cloudpickle raises TypeError, PicklingError, ...
            raise MirageError(
                f"the search's pruner or checker cannot be sent to Ray workers ({e}); "
                "pass a picklable recipe as components=... (superoptimize does) so "
                "that each worker builds its own"
            ) from None
        queue = list(todo)
        queue.reverse()
        pending: dict[Any, int] = {}

        def may_dispatch() -> bool:
            return bool(queue) and (soft_deadline is None or time.monotonic() < soft_deadline)

        try:
            while pending or may_dispatch():
                while len(pending) < self.workers and may_dispatch():
                    i = queue.pop()
                    pending[_unit_task.remote(job_ref, i)] = i
                wait = None if hard_deadline is None else max(0.0, hard_deadline - time.monotonic())
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=wait)
                if not ready:
                    return HARD_STOP
                ref = ready[0]
                pending.pop(ref)
                try:
                    r: UnitResult = ray.get(ref)
                except ray.exceptions.RayTaskError as e:
                    raise e.as_instanceof_cause() from None
                except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError) as e:
                    raise MirageError(
                        f"a search unit's worker died {MAX_RETRIES + 1} times ({e}); "
                        "the checkpoint keeps every finished unit: run again to "
                        "resume"
                    ) from None
                if not on_result(r):
                    return None
            return None
        finally:
            _cancel_running(list(pending))


def _cancel_running(refs: list[Any]) -> None:
    """Cancel, killing their worker processes, those tasks of ``refs`` that have not finished.

    A finished task must be left alone: ``ray.cancel`` (forced or not) on a task whose reply
    the driver's Ray core worker is still recording aborts the driver process (Ray 2.60: a
    failed ``RAY_CHECK``, "Tried to complete task that was not pending"; reproduced by
    cancelling a task right after ``ray.wait`` returned it). On SIGINT/SIGTERM that is the
    usual case, not a rare one: the signal stays pending while ``ray.wait`` blocks, its handler
    runs the moment a finishing task wakes the driver, and that task is still in ``pending``.
    What is left is a task whose reply arrives between the ``ray.wait`` here and its
    ``ray.cancel``."""
    if not refs:
        return
    _, running = ray.wait(refs, num_returns=len(refs), timeout=0, fetch_local=False)
    for ref in running:
        ray.cancel(ref, force=True)
