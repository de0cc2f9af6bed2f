"""Credentials inside URLs never reach the run file, stdout or stderr.

A proxy or base URL with a password in it is passed to the CLIs (proxies are on every
voice's allowlist); leaky fakes print it back whole, decoded, and inside an error.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.fakes.bin import install_fake, path_with
from tests.helpers import answer, claim

Q = "Should we shard the orders table?"
PASSWORD = "pr0xy-Pa%24%24word"  # percent-encoded, as it must be inside a URL
DECODED = "pr0xy-Pa$$word"
PROXY = f"http://alice:{PASSWORD}@127.0.0.1:9"
RUNE = [sys.executable, "-m", "rune_council.cli", "council"]
BASE = "https://bob:base-url-secret-77@127.0.0.1:9/v1"


def test_url_userinfo_is_masked_in_run_file_stdout_and_stderr(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    leaky = answer(Q, "NO", [claim(f"I went through {PROXY} with {DECODED}", anchor=BASE)])
    install_fake(bin_dir, "claude", answer=leaky)
    install_fake(
        bin_dir, "codex", answer=f"error: proxy {PROXY} refused", format="text", exit_code=1
    )
    env = {
        "PATH": path_with(bin_dir),
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "RUNE_COUNCIL_LOGIN_SHELL": "0",
        "HTTPS_PROXY": PROXY,
        "OPENAI_BASE_URL": BASE,
    }
    outputs = []
    for run_id, extra in (("u0", []), ("u1", ["--json"])):
        out = subprocess.run(
            [*RUNE, Q, "--id", run_id, "--yes", *extra],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        assert out.returncode in (0, 1), out.stderr
        outputs += [out.stdout, out.stderr]
    written = [p for p in (tmp_path / ".rune").rglob("*") if p.is_file()]
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in written] + outputs
    for secret in (PASSWORD, DECODED, "base-url-secret-77"):
        assert not [t for t in texts if secret in t], f"{secret} leaked"
    run_file = (tmp_path / ".rune" / "council" / "run-u1.json").read_text()
    # The leak happened and was masked where it was, the rest of the text intact.
    assert "http://[redacted]@127.0.0.1:9" in run_file
    assert "refused" in run_file
