"""The attack catalogue, run against ``rune council`` as an outsider would, with figures.

```sh
.venv/bin/python bench/attacks.py              # every attack; 2 to 6 minutes on 2 cores
.venv/bin/python bench/attacks.py --only serve # the attacks whose name or section has "serve"
.venv/bin/python bench/attacks.py --json       # the rows and the summary as JSON
```

Every attack runs in a private temp dir, with real processes: ``rune`` itself, the test
suite's fake CLIs under their real names, real servers on 127.0.0.1 ports (hostile model
endpoints, and ``rune council serve`` attacked as a web page would). The attacks live in
``bench/attack_sets/``, one file a class of attack:

- ``classic.py``: floods, deep nesting, escape sequences, echoed secrets, odd artifacts,
  daemons, SIGTERM/SIGKILL, a reused run id, a hostile endpoint;
- ``runfiles.py``: run files planted in a cloned repository, read by list, show and watch;
- ``local_server.py``: DNS rebinding, foreign origins, form posts and deep nests against ``serve``;
- ``endpoints.py``: compression bombs, brotli, a repository's keyless endpoint, escape
  sequences and keys in model ids;
- ``disguises.py``: keys echoed back in disguise (escaped, base64, hex, split, ...);
- ``caches.py``: stale family labels, the runtimes cache, symlinked dotfiles;
- ``ballots.py``: forged ballots that ``rune council verify`` must name;
- ``doors.py``: the newer doors fed hostile files: an eval dataset, a change under
  ``rune council review``, a planted list index and planted eval scores.

For each attack a row records the exit code of the process that decided it and whether
that exit was allowed, the peak resident memory (``wait4``'s ru_maxrss, which covers the
process and the children it waited for; for ``serve`` the server's), the row's wall time,
orphans (processes still alive afterwards that name the attack's temp dir or carry a voice
marker it planted), leaks (planted secrets, or raw escape sequences on stdout/stderr), and
``held`` with a one-line reason: the attack's own criterion, an allowed exit, no orphan and
no leak. The summary counts attacks tried, held and broke (by name), orphans, leaks and the
largest peak. A row that needs root says so and is skipped as another user.

Nothing is asserted: the test suite asserts; this prints what happened so the README can
quote it.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attack_sets import ATTACKS, Row, run_attack  # noqa: E402


def summary(rows: list[Row], seconds: float) -> dict[str, Any]:
    tried = [r for r in rows if not r.skipped]
    return {
        "tried": len(tried),
        "held": sum(r.held for r in tried),
        "broke": [r.attack for r in tried if not r.held],
        "skipped": [r.attack for r in rows if r.skipped],
        "orphans": sum(r.orphans for r in tried),
        "leaks": sum(len(r.leaks) for r in tried),
        "max_peak_mb": max((r.peak_mb for r in tried), default=0.0),
        "max_peak_attack": max(tried, key=lambda r: r.peak_mb).attack if tried else None,
        "seconds": round(seconds, 1),
    }


def line(row: Row) -> str:
    mark = "skip" if row.skipped else ("held" if row.held else "BROKE")
    exit_ = "-" if row.exit is None and row.skipped else str(row.exit)
    return (
        f"{mark:<5} {row.attack:<62} exit {exit_:>4}  peak {row.peak_mb:6.1f} MB  "
        f"{row.seconds:5.1f} s  orphans {row.orphans}  leaks {len(row.leaks)}  {row.reason}"
        + (f" [{row.note}]" if row.note else "")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the rows and the summary")
    parser.add_argument("--only", help="run the attacks whose name or section contains this")
    args = parser.parse_args()
    started = time.monotonic()
    rows: list[Row] = []
    section = None
    for name, part, attack in ATTACKS:
        if args.only and args.only not in name and args.only not in part:
            continue
        if not args.json and part != section:
            print(f"\n## {part}", flush=True)
            section = part
        with tempfile.TemporaryDirectory(prefix="rune-attack-") as tmp:
            row = run_attack(Path(tmp), name, part, attack)
        rows.append(row)
        if not args.json:
            print(line(row), flush=True)
    total = summary(rows, time.monotonic() - started)
    if args.json:
        print(json.dumps({"rows": [asdict(r) for r in rows], "summary": total}, indent=2))
        return
    broke = ", ".join(total["broke"]) or "none"
    skipped = f" (skipped {len(total['skipped'])}: {', '.join(total['skipped'])})"
    print(
        f"\nattacks tried {total['tried']}{skipped if total['skipped'] else ''}; "
        f"held {total['held']}; broke {len(total['broke'])}: {broke}\n"
        f"orphans {total['orphans']}; leaks {total['leaks']}; max peak memory "
        f"{total['max_peak_mb']:.1f} MB ({total['max_peak_attack']}); "
        f"wall time {total['seconds']:.0f} s"
    )


if __name__ == "__main__":
    main()
