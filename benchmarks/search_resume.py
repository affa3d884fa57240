"""Kill a search mid-run (SIGKILL, no chance to clean up), resume it from its checkpoint, and
compare the accepted set with an uninterrupted run of the same search.

    python benchmarks/search_resume.py --workload rmsnorm --kill-after 15

Writes benchmarks/results/search_resume.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from search_common import machine, make_checker, make_pruner

from mirage_formal import workloads
from mirage_formal.search import WORKLOAD_PRESETS, SearchConfig, run_search


def search(args: argparse.Namespace, checkpoint: str | None) -> list[str]:
    prog = workloads.program(args.workload)
    cfg = SearchConfig.from_preset(WORKLOAD_PRESETS[args.workload], checkpoint_every_s=0.0)
    r = run_search(prog, cfg, make_pruner(args.pruner, prog), make_checker(args.checker, prog),
                   checkpoint=checkpoint, workers=args.workers, progress=False)
    assert r.complete
    return [a.graph.key for a in r.accepted]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="rmsnorm")
    ap.add_argument("--pruner", default="oracle")
    ap.add_argument("--checker", default="field")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--kill-after", type=float, default=15.0)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "search_resume"))
    args = ap.parse_args()
    if args.child:
        search(args, args.child)
        return
    ck = os.path.join(tempfile.mkdtemp(), "ckpt.json")
    cmd = [sys.executable, __file__, "--workload", args.workload, "--pruner", args.pruner,
           "--checker", args.checker, "--workers", str(args.workers), "--child", ck]
    child = subprocess.Popen(cmd, start_new_session=True)
    time.sleep(args.kill_after)
    killed = child.poll() is None
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    doc = json.loads(Path(ck).read_text()) if os.path.exists(ck) else {"done": [], "accepted": {"ugraphs": []}}
    t = time.monotonic()
    resumed = search(args, ck)
    t_resume = time.monotonic() - t
    t = time.monotonic()
    full = search(args, None)
    t_full = time.monotonic() - t
    row = {"workload": args.workload, "pruner": args.pruner, "checker": args.checker,
           "killed_mid_run": killed, "kill_after_s": args.kill_after,
           "units_done_at_kill": len(doc["done"]), "accepted_at_kill": len(doc["accepted"]["ugraphs"]),
           "resume_s": round(t_resume, 2), "uninterrupted_s": round(t_full, 2),
           "accepted_resumed": len(resumed), "accepted_uninterrupted": len(full),
           "same_accepted_set": resumed == full, "machine": machine()}
    print(json.dumps(row, indent=1))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{out}.json").write_text(json.dumps(row, indent=1) + "\n")
    Path(f"{out}.md").write_text(
        "# search_resume\n\n" + "\n".join(f"- {k}: {v}" for k, v in row.items()) + "\n")


if __name__ == "__main__":
    main()
