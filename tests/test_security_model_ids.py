"""A model id that carries the endpoint's own key never reaches the cache or the screen.

A hostile server on 127.0.0.1 lists, beside an honest model, one whose id embeds the key it
was sent (plainly and base64-encoded). ``rune council endpoints --refresh-models`` runs as a
real process; its output and every file it writes are searched for the key.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers import answer, claim
from tests.http_server import OpenAIServer, answering

Q = "Should we shard the orders table?"
KEY = "nvapi-planted-Zq8Rk2Lm5Xw9Tb4Hc7Ny3Pv6"


def test_a_model_id_carrying_the_key_is_left_out(tmp_path: Path) -> None:
    honest = "meta/llama-3.3-70b-instruct"
    leaky = [f"leak/{KEY}", "leak/" + base64.b64encode(KEY.encode()).decode()]
    good = answer(Q, "NO", [claim("The plan has no rollback step")])
    with OpenAIServer(
        models=[honest, *leaky], behaviours={m: answering(good) for m in [honest, *leaky]}
    ) as srv:
        user = tmp_path / ".config" / "rune-council"
        user.mkdir(parents=True)
        (user / "council.toml").write_text(
            f'[endpoints.lab]\nbase_url = "{srv.base_url}"\nkey_env = "LAB_KEY"\n'
        )
        ran = subprocess.run(
            [sys.executable, "-m", "rune_council.cli", "council", "endpoints", "--refresh-models"],
            cwd=tmp_path,
            env={
                "PATH": "/usr/bin:/bin",
                "HOME": str(tmp_path),
                "LANG": "C.UTF-8",
                "LAB_KEY": KEY,
                "RUNE_COUNCIL_LOGIN_SHELL": "0",
            },
            capture_output=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        assert srv.models_calls == 1
    assert ran.returncode == 0, ran.stderr
    out = ran.stdout.decode() + ran.stderr.decode()
    assert honest in out
    forms = [KEY, KEY[8:20], base64.b64encode(KEY.encode()).decode()[:16]]
    for form in forms:
        assert form not in out
    for root, _dirs, files in os.walk(tmp_path):
        for name in files:
            text = Path(root, name).read_bytes().decode(errors="replace")
            if name == "council.toml":
                continue
            for form in forms:
                assert form not in text, f"{form!r} written to {Path(root, name)}"
