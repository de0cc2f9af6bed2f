"""A drop reason is one line read out of the CLI's own error; the whole of what it printed
stays in the attempt record. The CLIs here are small scripts printing exactly what the real
gemini 0.61.0 and claude 2.1.197 print when they cannot authenticate."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.helpers import run_rune, user_env

Q = "Should we shard the orders table?"
GEMINI_MESSAGE = (
    "Please set an Auth method in your /home/u/.gemini/settings.json or specify one of the "
    "following environment variables before running: GEMINI_API_KEY, "
    "GOOGLE_GENAI_USE_VERTEXAI, GOOGLE_GENAI_USE_GCA"
)
GEMINI_STDERR = json.dumps(
    {"session_id": "5a6a", "error": {"type": "Error", "message": GEMINI_MESSAGE, "code": 41}},
    indent=2,
)
CLAUDE_STDOUT = json.dumps(
    {
        "type": "result",
        "subtype": "success",
        "is_error": True,
        "api_error_status": None,
        "result": "Not logged in · Please run /login",
    }
)


def script(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    path.chmod(0o755)


def install(tmp: Path) -> None:
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    (tmp / "gemini-err.json").write_text(GEMINI_STDERR, encoding="utf-8")
    (tmp / "claude-out.json").write_text(CLAUDE_STDOUT, encoding="utf-8")
    script(
        bin_dir / "gemini",
        'if [ "$1" = "--version" ]; then echo 0.61.0; exit 0; fi\n'
        f"cat > /dev/null; cat {tmp / 'gemini-err.json'} >&2; exit 41\n",
    )
    # Its status command has nothing to say, so the council tries it (auth unknown).
    script(
        bin_dir / "claude",
        'if [ "$1" = "--version" ]; then echo "2.1.197 (Claude Code)"; exit 0; fi\n'
        'if [ "$1" = "auth" ]; then exit 2; fi\n'
        f"cat > /dev/null; cat {tmp / 'claude-out.json'}; exit 1\n",
    )
    gemini = tmp / ".gemini"
    gemini.mkdir()
    (gemini / "settings.json").write_text(
        '{"security": {"auth": {"selectedType": "gemini-api-key"}}}', encoding="utf-8"
    )


def rune(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_rune(tmp, user_env(tmp), *args)


def test_a_clis_json_error_becomes_a_one_line_reason_and_the_output_is_kept(
    tmp_path: Path,
) -> None:
    install(tmp_path)
    ran = rune(tmp_path, "council", Q, "--json", "--id", "r1")
    assert ran.returncode == 1, ran.stderr
    result = json.loads(ran.stdout)
    by_runtime = {v["attempts"][0]["runtime"]: v for v in result["voices"]}
    gemini, claude = by_runtime["gemini"], by_runtime["claude"]
    for voice in (gemini, claude):
        assert "\n" not in voice["drop_reason"]
        assert "\n" not in voice["attempts"][0]["detail"]
    assert f"gemini reported an error: {GEMINI_MESSAGE}" in gemini["drop_reason"]
    assert "{" not in gemini["drop_reason"]  # the message, not a JSON dump
    assert "exited 41" in gemini["drop_reason"]
    assert "claude reported an error: Not logged in · Please run /login" in claude["drop_reason"]
    # What gemini printed is kept whole, lines and all, in the attempt record.
    assert gemini["attempts"][0]["output_tail"] == GEMINI_STDERR


def test_show_prints_each_dropped_voice_on_one_line(tmp_path: Path) -> None:
    install(tmp_path)
    rune(tmp_path, "council", Q, "--json", "--id", "r2")
    shown = rune(tmp_path, "council", "show", "r2")
    assert shown.returncode in (0, 1), shown.stderr
    dropped = [line for line in shown.stdout.splitlines() if "dropped:" in line]
    assert len(dropped) == 3, shown.stdout  # three slots, each on its own line
    assert not any(line.lstrip().startswith(('"', "}")) for line in shown.stdout.splitlines())
