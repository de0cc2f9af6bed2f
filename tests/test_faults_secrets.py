"""A planted secret never reaches anything rune-council writes or prints.

Keys are planted in the environment; leaky fake CLIs then do the worst they can with the
keys they are allowed to see: print them in their version string, in their answer and in
their error output. The run file, ``runtimes.json``, the consent file and everything
``rune council`` prints (the progress log on stderr, the result on stdout) are searched.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.fakes.bin import install_fake, path_with
from tests.helpers import answer, claim

Q = "Should we shard the orders table?"
SECRETS = {
    "ANTHROPIC_API_KEY": "sk-ant-planted-0f1e2d3c4b5a",
    "OPENAI_API_KEY": "sk-proj-planted-99887766",
    "QWEN_AUTH_TOKEN": "qw-planted-55443322",
    "GITHUB_TOKEN": "ghp_planted_1122334455",
}


def test_planted_keys_stay_out_of_run_file_cache_and_logs(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    anthropic, openai = SECRETS["ANTHROPIC_API_KEY"], SECRETS["OPENAI_API_KEY"]
    leaky = answer(Q, "NO", [claim(f"my key is {anthropic}", anchor=anthropic)])
    # claude answers with its key inside; its version string carries it too.
    install_fake(bin_dir, "claude", answer=leaky, version=anthropic)
    # codex fails, its error output quoting the key it was given.
    install_fake(
        bin_dir,
        "codex",
        answer=f"error: key {openai} rejected",
        format="text",
        exit_code=1,
    )
    # qwen "succeeds" with an API error that quotes its token (exit 0).
    install_fake(bin_dir, "qwen", answer=f"[API Error: 401 bad token {SECRETS['QWEN_AUTH_TOKEN']}]")
    env = {
        "PATH": path_with(bin_dir),
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "RUNE_COUNCIL_LOGIN_SHELL": "0",
        **SECRETS,
    }
    outputs = []
    for index, extra in enumerate(([], ["--json"])):
        run_id = f"s{index}"
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "rune_council.cli",
                "council",
                Q,
                "--id",
                run_id,
                "--yes",
                *extra,
            ],
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
    names = {p.name for p in written}
    assert {"runtimes.json", "run-s0.json", "run-s1.json"} <= names
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in written] + outputs
    for value in SECRETS.values():
        assert not [t for t in texts if value in t], f"{value} leaked"
    # The leaks were real and were masked, not merely absent.
    assert any("[redacted]" in t for t in texts)
    run_file = (tmp_path / ".rune" / "council" / "run-s1.json").read_text()
    assert "rejected" in run_file and "[API Error: 401" in run_file
