"""A council run loads only what it uses: the start-up cost every `rune council` pays."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# Loaded by tools beside us (httpx's own command line, a terminal renderer, the regex engine
# for user patterns, the process-tree library and libc bindings for CLI voices) but never
# needed by a council of HTTP voices answering as JSON.
NOT_NEEDED = ("rich", "pygments", "click", "regex", "psutil", "ctypes", "configparser")


def loaded_after(code: str) -> list[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_http_voice_module_does_not_load_httpx_command_line_tool() -> None:
    loaded = loaded_after("import rune_council.runtimes.http")
    assert "httpx" in loaded
    assert [m for m in NOT_NEEDED if m in loaded] == []


def test_a_json_council_run_loads_no_terminal_renderer_or_regex_engine(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from rune_council import CouncilOptions, convene\n"
        "from rune_council.testing import ScriptedRuntime, answer_for\n"
        "q = 'Should we shard the orders table?'\n"
        "voices = [ScriptedRuntime(answer_for(q, 'NO'), name=n, family=f) for n, f in "
        "(('a', 'anthropic'), ('b', 'openai'))]\n"
        f"r = convene({{'id': 'imp', 'question': q, 'n': 2}}, CouncilOptions(runtimes=voices, "
        f"rune_dir={str(tmp_path)!r}))\n"
        "assert r.voices_valid == 2, r.notes\n"
        "import rune_council.runtimes.http\n"
    )
    loaded = loaded_after(code)
    assert [m for m in NOT_NEEDED if m in loaded] == []
