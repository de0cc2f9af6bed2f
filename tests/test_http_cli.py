"""`rune council --endpoint URL --key-env VAR` as a user runs it: a real process, no config."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.helpers import answer, claim
from tests.http_server import Behaviour, OpenAIServer, answering
from tests.private_dirs import private_base

Q = "Should we shard the orders table?"
KEY = "sk-cli-PLANTED-55aa11bb22"
LLAMA = "meta/llama-3.3-70b-instruct"
MISTRAL = "mistralai/mistral-large-2-instruct"
QWEN = "qwen/qwen2.5-72b-instruct"
GEMMA = "google/gemma-2-27b-it"


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    srv = OpenAIServer(
        models=[LLAMA, MISTRAL, QWEN, GEMMA],
        behaviours={
            LLAMA: answering(answer(Q, "NO", [claim("No rollback step is defined")])),
            MISTRAL: Behaviour("truncated_stream", answer(Q, "NO", [])),
            QWEN: answering(answer(Q, "YES", [claim("Eight shards leave headroom")])),
            GEMMA: answering(answer(Q, "MIXED", [claim("Shard later")])),
        },
    )
    with srv:
        yield srv


def rune(tmp: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    (tmp / "bin").mkdir(exist_ok=True)
    base = {"PATH": f"{tmp / 'bin'}:/usr/bin:/bin", "HOME": str(tmp), "LANG": "C.UTF-8"}
    return subprocess.run(
        [sys.executable, "-m", "rune_council.cli", *args],
        cwd=tmp,
        env={**base, "RUNE_COUNCIL_ALLOW_EXTERNAL": "1", **env},
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_endpoint_and_key_env_on_the_command_line_need_no_config(
    tmp_path: Path, server: OpenAIServer
) -> None:
    url = server.base_url.removesuffix("/v1")  # a bare host:port works too
    out = rune(
        tmp_path,
        "council",
        "--endpoint",
        url,
        "--key-env",
        "MY_KEY",
        "--id",
        "cli1",
        "--json",
        Q,
        MY_KEY=KEY,
    )
    assert out.returncode == 0, out.stderr
    assert not (tmp_path / ".rune" / "council.toml").exists()
    doc = json.loads(out.stdout)
    assert doc["decorrelation"] == "MULTI_FAMILY"
    v2 = doc["voices"][1]
    assert [(a["model"], a["outcome"]) for a in v2["attempts"]] == [
        (MISTRAL, "transport_error"),
        (GEMMA, "ok"),
    ]
    assert {s.authorization for s in server.requests()} == {f"Bearer {KEY}"}
    assert KEY not in out.stdout + out.stderr
    for path in (tmp_path / ".rune").rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(errors="replace"), path


def test_human_output_names_the_endpoint_models(tmp_path: Path, server: OpenAIServer) -> None:
    out = rune(tmp_path, "council", "--endpoint", server.base_url, "--id", "cli2", Q)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[1].startswith("- **Decorrelation**: MULTI_FAMILY")
    # An endpoint given by URL is named after its host and port.
    port = urlsplit(server.base_url).port
    assert f"  - v1 127.0.0.1-{port}:{LLAMA} (meta): NO" in out.stdout


def test_a_missing_key_variable_is_bad_input_with_one_clear_line(
    tmp_path: Path, server: OpenAIServer
) -> None:
    out = rune(tmp_path, "council", "--endpoint", server.base_url, "--key-env", "NOPE_KEY", Q)
    assert out.returncode == 2
    port = urlsplit(server.base_url).port
    assert out.stderr.strip().splitlines() == [
        f"rune council: endpoint 127.0.0.1-{port}: no API key: $NOPE_KEY is not set"
    ]
    assert server.requests() == []


def test_a_bad_endpoint_argument_is_bad_input(tmp_path: Path) -> None:
    out = rune(tmp_path, "council", "--endpoint", "not-a-url", Q)
    assert out.returncode == 2
    assert "neither an http(s) base URL nor a known endpoint" in out.stderr


@pytest.fixture
def cache_home() -> Iterator[str]:
    """An XDG_CACHE_HOME no other user can write: where the model lists are kept."""
    with private_base() as private:
        yield str(private / "cache")


def test_subagent_endpoint_and_refresh_models_flags(
    tmp_path: Path, server: OpenAIServer, cache_home: str
) -> None:
    args = ["council", "--json", "--subagent-endpoint", server.base_url]
    cache = {"XDG_CACHE_HOME": cache_home}
    first = rune(tmp_path, *args, "--subagent-model", QWEN, "--id", "sa1", Q, **cache)
    assert first.returncode == 0, first.stderr
    doc = json.loads(first.stdout)
    assert {v["model"] for v in doc["voices"]} == {QWEN}
    assert {v["source"] for v in doc["voices"]} == {"subagent"}
    assert server.models_calls == 1
    rune(tmp_path, *args, "--id", "sa2", Q, **cache)
    assert server.models_calls == 1  # cached
    rune(tmp_path, *args, "--refresh-models", "--id", "sa3", Q, **cache)
    assert server.models_calls == 2


def test_endpoints_lists_the_ranked_models_with_families_and_no_key(
    tmp_path: Path, server: OpenAIServer, cache_home: str
) -> None:
    server.models.append("nvidia/nv-embedqa-e5-v5")
    (tmp_path / ".rune").mkdir()
    (tmp_path / ".rune" / "council.toml").write_text(
        f'[endpoints.lab]\nbase_url = "{server.base_url}"\nkey_env = "LAB_KEY"\n'
        f'prefer = ["{GEMMA}"]\nexclude = ["{MISTRAL}"]\n'
    )
    assert rune(tmp_path, "council", "trust").returncode == 0  # it names a key: the user's call
    out = rune(tmp_path, "council", "endpoints", LAB_KEY=KEY, XDG_CACHE_HOME=cache_home)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith(f"lab  {server.base_url}  key: $LAB_KEY  (models listed at ")
    assert [line.split()[1] for line in lines[1:4]] == [GEMMA, LLAMA, QWEN]
    assert lines[1].split()[2:4] == ["google", "confirmed"]
    assert lines[4].startswith("  left out (2, excluded or not a chat model): ")
    assert KEY not in out.stdout + out.stderr
    assert server.chat_models() == []  # listing asks no model anything

    listed = rune(
        tmp_path, "council", "endpoints", "--json", LAB_KEY=KEY, XDG_CACHE_HOME=cache_home
    )
    doc = json.loads(listed.stdout)
    assert doc[0]["models_from"] == "model list cached"
    assert server.models_calls == 1
    missing = rune(tmp_path, "council", "endpoints")
    assert missing.returncode == 0
    assert "no API key: $LAB_KEY is not set" in missing.stdout
