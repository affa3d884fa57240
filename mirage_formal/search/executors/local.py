"""Executors on this machine: inline (one worker) and a fork-based process pool.

The pool forks after the driver has registered its pruner and checker
(:func:`~mirage_formal.search.executors.unit.register`), so workers inherit them (the oracle's
Z3 context and caches included) and only unit indices and results are pickled. Each worker
runs :func:`~mirage_formal.search.signals.worker_initializer` first (ignores SIGINT, dies with
its parent) and limits the native thread pools it inherited (OpenBLAS's, which numpy
starts with one thread per core) to one thread: a worker is one unit of parallelism, and on
the device machine's 16 cores 14 workers with 16 spinning BLAS threads each finished 821 of
gqa's 1100 units in 90 s where Ray's workers (which Ray starts with ``OMP_NUM_THREADS=1``)
finished all of them in 62 s. Results arrive unordered, as units finish: a long unit never holds back the
results of the units after it.

Imports ``search`` and ``idle`` only.
"""

from __future__ import annotations

import multiprocessing as mp
import multiprocessing.pool
import os
import time
from collections.abc import Sequence

from threadpoolctl import threadpool_limits

from mirage_formal import idle
from mirage_formal.search.executors import OnResult
from mirage_formal.search.executors.unit import Job, UnitResult, run_unit
from mirage_formal.search.signals import worker_initializer

HARD_STOP = "time budget spent (units still running at the deadline were stopped)"

_POOL_JOB: dict[str, Job] = {}


def default_workers() -> int:
    """Every core this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


class InlineExecutor:
    """Runs every unit in this process, in order."""

    name = "inline"
    workers = 1

    def run(
        self,
        job: Job,
        todo: Sequence[int],
        on_result: OnResult,
        soft_deadline: float | None,
        hard_deadline: float | None,
    ) -> str | None:
        # one BLAS thread while the units run here, as in a pool worker; restored afterwards
        with threadpool_limits(limits=1):
            for i in todo:
                if not on_result(run_unit(job, i, f"pid {os.getpid()}")):
                    break
        return None


def _init_pool_worker(parent_pid: int) -> None:
    worker_initializer(parent_pid)
    # (kept for the worker's life: the limit object is never exited)
    threadpool_limits(limits=1)


def _pool_unit(args: tuple[str, int]) -> UnitResult:
    job_id, index = args
    with idle.busy():  # (the verifier gives idle workers' cores to a long unit's trials)
        return run_unit(_POOL_JOB[job_id], index, f"pid {os.getpid()}")


class PoolExecutor:
    """A pool of ``workers`` forked processes on this machine."""

    name = "local"

    def __init__(self, workers: int) -> None:
        self.workers = workers

    def run(
        self,
        job: Job,
        todo: Sequence[int],
        on_result: OnResult,
        soft_deadline: float | None,
        hard_deadline: float | None,
    ) -> str | None:
        # (units dispatched after the soft deadline return at once: run_unit checks it first)
        _POOL_JOB[job.id] = job
        ctx = mp.get_context("fork")
        size = min(self.workers, max(1, len(todo)))
        idle.install(ctx.Value("i", 0), size)  # before the fork: the workers share it
        pool: multiprocessing.pool.Pool = ctx.Pool(
            size,
            initializer=_init_pool_worker,
            initargs=(os.getpid(),),
        )
        try:
            it = pool.imap_unordered(_pool_unit, [(job.id, i) for i in todo], chunksize=1)
            for _ in range(len(todo)):
                wait = None if hard_deadline is None else max(0.0, hard_deadline - time.monotonic())
                try:
                    r = it.next(wait)
                except mp.TimeoutError:
                    return HARD_STOP
                if not on_result(r):
                    break
            return None
        finally:
            # terminate (SIGTERM) also on success: the workers have nothing left to do, and an
            # interrupt or error must not wait for units still running
            pool.terminate()
            pool.join()
            _POOL_JOB.pop(job.id, None)
            idle.uninstall()
