"""The superoptimizer's search: enumeration of kernel and block graphs, pruning through a
handed-in :class:`Pruner`, verification through a handed-in :class:`Checker`, an analytic
cost model for ranking, budgets, checkpoints, signals and executors (a local process pool, or
Ray tasks through the optional ``ray`` extra, imported only when asked for).

Imports ``ir`` only (and the data-folder locator); never ``formal``, ``verify`` or ``codegen``.
"""

from mirage_formal.search.config import (
    WORKLOAD_PRESETS,
    SearchConfig,
    SearchConfigError,
    default_preset,
    parse_overrides,
    preset_names,
)
from mirage_formal.search.cost import Cost, estimate, input_cost, smem_bytes, speedup
from mirage_formal.search.derive import derive_config, derive_fields
from mirage_formal.search.driver import SearchResult, check_program, rank, run_search
from mirage_formal.search.executors import Executor, make_executor
from mirage_formal.search.protocols import Chain, Checker, KeepAll, Pruner
from mirage_formal.search.signals import SearchInterrupted
from mirage_formal.search.state import Accepted

__all__ = ["WORKLOAD_PRESETS", "Accepted", "Chain", "Checker", "Cost", "Executor", "KeepAll", "Pruner",
           "SearchConfig", "SearchConfigError", "SearchInterrupted", "SearchResult", "check_program",
           "default_preset", "derive_config", "derive_fields", "estimate", "input_cost", "make_executor",
           "parse_overrides", "preset_names", "rank", "run_search", "smem_bytes", "speedup"]
