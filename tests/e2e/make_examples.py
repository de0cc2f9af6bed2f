"""Regenerate ``.rune-example/`` from real councils of the pinned CLIs on the loopback server.

    python -m tests.e2e.make_examples

Writes a finished run file, the skeleton a live reader sees first, a run where codex failed
and a subagent took its slot, and the runtimes cache. Machine paths are replaced with a
neutral home so the examples read the same anywhere.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from tests.e2e import test_council_real as scenario
from tests.e2e.clis import cli_environment, node_bin_dir
from tests.e2e.model_server import ANTHROPIC, GEMINI, OPENAI_RESPONSES, ModelServer
from tests.helpers import PLAN

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / ".rune-example"
QUESTION = "Is the orders sharding plan in plan.md safe to execute as written?"
NEUTRAL_HOME = "/home/dev"


def _council(
    scratch: Path,
    run_id: str,
    *,
    fail: str | None = None,
    subagent: bool = False,
    keep_first: bool = False,
) -> Path:
    with ModelServer() as server:
        server.answers[ANTHROPIC] = scenario.claude_answer
        server.answers[OPENAI_RESPONSES] = scenario.codex_answer
        server.answers[GEMINI] = scenario.gemini_answer
        if fail:
            server.fail[fail] = 400
        home = scratch / run_id
        home.mkdir()
        env = cli_environment(home, server)
        env["PYTHONPATH"] = str(REPO)
        work = home / "orders-service"
        work.mkdir()
        (work / "plan.md").write_text(PLAN, encoding="utf-8")
        argv = [
            sys.executable,
            "-m",
            "rune_council.cli",
            "council",
            QUESTION,
            "--mode",
            "critique",
            "--artifact",
            "plan.md",
            "--id",
            run_id,
            "--json",
            "--yes",
        ]
        if subagent:
            argv += ["--subagent-cmd", f"{sys.executable} {scenario.SUBAGENT_SCRIPT}"]
        run_file = work / ".rune" / "council" / f"run-{run_id}.json"
        first: list[bytes] = []
        done = threading.Event()

        def catch_skeleton() -> None:
            while not done.is_set() and not first:
                try:
                    first.append(run_file.read_bytes())
                except FileNotFoundError:
                    time.sleep(0.002)

        watcher = threading.Thread(target=catch_skeleton)
        watcher.start()
        subprocess.run(argv, cwd=work, env=env, capture_output=True, timeout=180, check=True)
        done.set()
        watcher.join()

        def neutral(raw: bytes) -> str:
            text = raw.decode().replace(str(node_bin_dir()), f"{NEUTRAL_HOME}/.local/bin")
            return text.replace(str(home), NEUTRAL_HOME)

        (OUT / "council").mkdir(parents=True, exist_ok=True)
        (OUT / "council" / f"run-{run_id}.json").write_text(neutral(run_file.read_bytes()))
        if keep_first and first:
            (OUT / "council" / f"run-{run_id}.skeleton.json").write_text(neutral(first[0]))
        runtimes = json.loads(neutral((work / ".rune" / "runtimes.json").read_bytes()))
        (OUT / "runtimes.json").write_text(json.dumps(runtimes, indent=2) + "\n")
        return work


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        _council(scratch, "orders-shard-critique", keep_first=True)
        _council(scratch, "orders-shard-codex-fallback", fail=OPENAI_RESPONSES, subagent=True)
    for path in sorted(OUT.rglob("*.json")):
        print(path.relative_to(REPO))


if __name__ == "__main__":
    main()
