"""The measured-kernel-time dataset that fits the cost model: records, loading, appending.

One JSON object per line in ``benchmarks/data/kernel_times.jsonl``::

    {"workload": str, "batch": int, "ugraph": <mirage_formal.ir.serialize.ugraph_to_json>,
     "measured_us": float, "estimated_us": float | null, "gpu": str, "method": str, "date": str}

``method`` says how the time was taken (timer, L2 flush, CUDA graph or not, the schedule), so
records from different methods are never mixed silently: :func:`load` can filter on it. A
malformed line raises with its line number. Imports the package only (no GPU, no torch).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mirage_formal.errors import MirageError
from mirage_formal.ir.graph import KernelGraph
from mirage_formal.ir.serialize import FORMAT, VERSION, ugraph_to_json, ugraphs_from_json

DATA = Path(__file__).resolve().parent / "data" / "kernel_times.jsonl"
FIELDS = {"workload": str, "batch": int, "ugraph": dict, "measured_us": (int, float), "gpu": str,
          "method": str, "date": str}


@dataclass(frozen=True)
class Record:
    workload: str
    batch: int
    graph: KernelGraph
    measured_us: float
    estimated_us: float | None
    gpu: str
    method: str
    date: str

    def to_json(self) -> dict[str, Any]:
        return {"workload": self.workload, "batch": self.batch, "ugraph": ugraph_to_json(self.graph),
                "measured_us": self.measured_us, "estimated_us": self.estimated_us, "gpu": self.gpu,
                "method": self.method, "date": self.date}


def ugraph_from_json(doc: dict[str, Any], where: str) -> KernelGraph:
    """One μGraph in our JSON form (``ugraph_to_json``), validated by the package's reader."""
    if "format" in doc:
        return ugraphs_from_json(doc, where)[0][0]
    wrapped = {"format": FORMAT, "version": VERSION, "ugraphs": [doc]}
    return ugraphs_from_json(wrapped, where)[0][0]


def parse(doc: Any, where: str) -> Record:
    if not isinstance(doc, dict):
        raise MirageError(f"{where}: a record is a JSON object, got {type(doc).__name__}")
    for k, ty in FIELDS.items():
        if k not in doc or not isinstance(doc[k], ty) or isinstance(doc[k], bool):
            raise MirageError(f"{where}: field {k!r} missing or not {ty}; see benchmarks/kernel_times.py")
    us = float(doc["measured_us"])
    if not math.isfinite(us) or us <= 0:
        raise MirageError(f"{where}: measured_us={us!r} must be a positive finite number")
    est = doc.get("estimated_us")
    graph = ugraph_from_json(doc["ugraph"], where)
    return Record(doc["workload"], int(doc["batch"]), graph, us, None if est is None else float(est),
                  doc["gpu"], doc["method"], doc["date"])


def load(path: str | Path = DATA, method_contains: str | None = None) -> list[Record]:
    """Every record of ``path`` (optionally only those whose method contains a string)."""
    out: list[Record] = []
    p = Path(path)
    for i, line in enumerate(p.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as e:
            raise MirageError(f"{p}:{i}: not JSON: {e}") from None
        r = parse(doc, f"{p}:{i}")
        if method_contains is None or method_contains in r.method:
            out.append(r)
    return out


def append(records: list[Record], path: str | Path = DATA) -> None:
    """Append ``records`` to ``path`` (one line each; the folder is created)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("a") as f:
        for r in records:
            f.write(json.dumps(r.to_json(), sort_keys=True) + "\n")
