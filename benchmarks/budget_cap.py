"""``--budget`` as a hard cap on the whole ``mirage-formal optimize`` command: runs the command
as a subprocess on a space that needs minutes (default gqa b=1) with several budgets and
reports the process's wall time against budget + 5%, the coverage and the estimate to finish.

    PYTHONPATH=. python3 benchmarks/budget_cap.py --budgets 5,10,30 --workers 2 --out benchmarks/results/budget_cap

Writes ``--out``/budget_cap.json and ``--out``/budget_cap.md (machine, load, command).
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from search_common import machine


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--program", default="gqa")
    ap.add_argument("--budgets", default="5,10,30")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for b in [float(x) for x in args.budgets.split(",") if x]:
        with tempfile.TemporaryDirectory() as d:
            cmd = [
                sys.executable,
                "-m",
                "mirage_formal.cli",
                "optimize",
                args.program,
                "--budget",
                str(b),
                "--workers",
                str(args.workers),
                "--no-gpu",
                "--quiet",
                "--json",
                "--out",
                d,
            ]
            t0 = time.monotonic()
            p = subprocess.run(cmd, capture_output=True, text=True)
            wall = time.monotonic() - t0
        s = json.loads(p.stdout) if p.stdout.strip().startswith("{") else {}
        rows.append(
            {
                "budget_s": b,
                "wall_s": round(wall, 3),
                "limit_s": round(b * 1.05, 3),
                "within": wall <= b * 1.05,
                "over_pct": round(100 * (wall - b) / b, 2),
                "exit": p.returncode,
                "units": s.get("units"),
                "coverage": s.get("coverage"),
                "eta_to_finish_s": s.get("eta_to_finish_s"),
                "accepted": s.get("accepted"),
                "seconds": s.get("seconds"),
            }
        )
        print(rows[-1], flush=True)
    doc = {
        "machine": machine(),
        "program": args.program,
        "workers": args.workers,
        "command": "PYTHONPATH=. python3 " + " ".join(shlex.quote(a) for a in sys.argv),
        "rows": rows,
    }
    (out / "budget_cap.json").write_text(json.dumps(doc, indent=1) + "\n")
    m = doc["machine"]
    lines = [
        f"# --budget as a hard cap: `mirage-formal optimize {args.program}` ({args.workers} workers)",
        "",
        f"- machine: {m['cpu']}, {m['cores']} cores, load {m['load_avg_1m']} at start; {m['date']}; "
        f"commit {m['commit']}",
        f"- command: `{doc['command']}`",
        "- wall: the whole process, interpreter start to exit, measured by the parent",
        "",
        "| budget s | wall s | budget + 5% | within | over % | units | coverage | est. s to finish | accepted |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['budget_s']} | {r['wall_s']} | {r['limit_s']} | {r['within']} | {r['over_pct']} | "
            f"{r['units']} | {r['coverage']} | {r['eta_to_finish_s']} | {r['accepted']} |"
        )
    (out / "budget_cap.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
