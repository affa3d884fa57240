"""The on-disk cache of superoptimized regions.

One JSON file per region, named by a SHA-256 over (program key, input and output shapes and
dtypes, GPU architecture or ``cpu``, package version, search settings). It holds the chosen
μGraph in our JSON form plus how it was obtained (search seconds, the budget, the verdict's
bound, the measured time on the GPU). A second process that compiles the same region reads the
file and skips the search; on a GPU the kernel is still compiled (NVRTC's own cubin cache makes
that a lookup) and validated before use. Files are written atomically; a file that does not
parse, or whose μGraph does not fit the program, is a miss (and is overwritten).

Imports ``ir`` and the errors (never torch).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mirage_formal.errors import FormatError
from mirage_formal.ir.graph import KernelGraph
from mirage_formal.ir.serialize import atomic_write_text, dumps_ugraphs, ugraphs_from_json

CACHE_FORMAT = 1


@dataclass(frozen=True)
class CachedRegion:
    """A region's chosen μGraph and the facts about how it was found."""

    graph: KernelGraph
    meta: Mapping[str, Any]

    @property
    def budget_s(self) -> float:
        return float(self.meta.get("budget_s") or 0.0)


@dataclass
class RegionCache:
    """Region results under ``root``; counts hits and misses (``stats``)."""

    root: Path
    stats: dict[str, int] = field(default_factory=lambda: {"hits": 0, "misses": 0, "writes": 0})

    def __post_init__(self) -> None:
        self.root = Path(self.root)

    @staticmethod
    def key(program: KernelGraph, arch: str, version: str, settings: Mapping[str, Any]) -> str:
        material = {
            "format": CACHE_FORMAT,
            "program": program.key,
            "arch": arch,
            "version": version,
            "inputs": [[list(n.shape), str(n.dtype)] for n in program.inputs],
            "outputs": [[list(n.shape), str(n.dtype)] for n in program.outputs],
            "settings": dict(settings),
        }
        return hashlib.sha256(
            json.dumps(material, sort_keys=True, default=str).encode()
        ).hexdigest()

    def path(self, key: str) -> Path:
        return self.root / f"{key[:32]}.json"

    def get(self, key: str, program: KernelGraph) -> CachedRegion | None:
        p = self.path(key)
        try:
            doc = json.loads(p.read_text())
            if doc.get("key") != key:
                raise FormatError(f"{p}: written for another key")
            ((graph, meta),) = ugraphs_from_json(doc["ugraphs"], str(p))
            fits = [(n.shape, n.dtype) for n in graph.inputs] == [
                (n.shape, n.dtype) for n in program.inputs
            ] and [n.shape for n in graph.outputs] == [n.shape for n in program.outputs]
            if not fits:
                raise FormatError(f"{p}: its μGraph does not fit the program")
        except (OSError, ValueError, KeyError, TypeError, FormatError):
            self.stats["misses"] += 1
            return None
        self.stats["hits"] += 1
        return CachedRegion(graph, meta)

    def put(self, key: str, graph: KernelGraph, meta: Mapping[str, Any]) -> Path:
        p = self.path(key)
        doc = {"key": key, "ugraphs": json.loads(dumps_ugraphs([graph], [dict(meta)]))}
        atomic_write_text(p, json.dumps(doc, indent=1) + "\n")
        self.stats["writes"] += 1
        return p
