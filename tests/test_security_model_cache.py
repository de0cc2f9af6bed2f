"""The model lists endpoints served are the user's own cache, never a project's file.

A cloned repository can ship anything in its ``.rune/``. A model list planted in
``.rune/endpoints/`` under the name this program once used there, for an endpoint the user
configured, would have its names listed by ``rune council endpoints`` and seated by a
council as models the endpoint serves, whenever the live listing fails. The list is kept
in a directory only the user can write (``$XDG_RUNTIME_DIR/rune-council/endpoints`` or
``~/.cache/rune-council/endpoints``, each only when nothing above it is writable by another
user) and nowhere else.

Every step is a real ``rune council`` process against a real loopback server.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import answer, claim
from tests.http_server import OpenAIServer, answering
from tests.private_dirs import private_base

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX permissions"),
]

Q = "Should we shard the orders table?"
LLAMA = "meta/llama-3.3-70b-instruct"
QWEN = "qwen/qwen2.5-72b-instruct"
# Names the endpoint never served; chosen so a family reading would seat them as two.
PLANTED = ["planted/gpt-4o-mini-exfil", "planted/claude-3-5-sonnet-exfil"]
GOOD = answer(Q, "NO", [claim("The plan has no rollback step")])


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    models = [LLAMA, QWEN, *PLANTED]
    with OpenAIServer(models=[LLAMA, QWEN], behaviours={m: answering(GOOD) for m in models}) as s:
        yield s


@pytest.fixture
def cache_home() -> Iterator[Path]:
    with private_base() as private:
        yield private / "cache"


def _project(tmp: Path, server: OpenAIServer) -> Path:
    """A project with the user's own config naming the loopback endpoint ``lab``."""
    user = tmp / ".config" / "rune-council"
    user.mkdir(parents=True)
    (user / "council.toml").write_text(f'[endpoints.lab]\nbase_url = "{server.base_url}"\n')
    project = tmp / "project"
    project.mkdir()
    return project


def _plant(project: Path, server: OpenAIServer) -> Path:
    """The list a repository ships, where and as this program once kept its own: same
    file name (endpoint name, base-URL hash), the endpoint's real base URL, a fresh time."""
    digest = hashlib.sha256(server.base_url.encode()).hexdigest()[:12]
    planted = project / ".rune" / "endpoints" / f"models-lab-{digest}.json"
    planted.parent.mkdir(parents=True)
    doc = {
        "schema_version": "1",
        "endpoint": "lab",
        "base_url": server.base_url,
        "fetched_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "models": PLANTED,
    }
    planted.write_text(json.dumps(doc))
    return planted


def rune(tmp: Path, project: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp),
        "LANG": "C.UTF-8",
        "RUNE_COUNCIL_LOGIN_SHELL": "0",
        "RUNE_COUNCIL_ALLOW_EXTERNAL": "1",
        **extra,
    }
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return subprocess.run(
        [sys.executable, "-m", "rune_council.cli", "council", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("private_cache", [True, False], ids=["private-cache", "no-private-root"])
def test_a_model_list_planted_in_the_project_is_never_listed_or_seated(
    tmp_path: Path, server: OpenAIServer, cache_home: Path, private_cache: bool
) -> None:
    project = _project(tmp_path, server)
    planted = _plant(project, server)
    before = planted.read_bytes()
    server.models_status = 500  # the live listing fails: a cache would stand in
    extra = {"XDG_CACHE_HOME": str(cache_home)} if private_cache else {}

    listed = rune(tmp_path, project, "endpoints", "--json", **extra)
    assert listed.returncode == 0, listed.stderr
    [lab] = json.loads(listed.stdout)
    assert [m["model"] for m in lab["ranked"]] == []
    assert lab["models_from"] == "no models"
    assert any("no cached or configured models to use" in n for n in lab["notes"]), lab
    shown = rune(tmp_path, project, "endpoints", **extra)
    assert not any(name in shown.stdout + shown.stderr for name in PLANTED), shown.stdout

    council = rune(tmp_path, project, Q, "--json", "--id", "c1", **extra)
    assert "no cached or configured models to use" in council.stdout + council.stderr
    assert server.chat_models() == []
    run_file = project / ".rune" / "council" / "run-c1.json"
    assert not any(name in run_file.read_text() for name in PLANTED)
    assert planted.read_bytes() == before  # not read, and not written either


def test_the_live_list_is_kept_in_the_users_cache_not_the_project(
    tmp_path: Path, server: OpenAIServer, cache_home: Path
) -> None:
    project = _project(tmp_path, server)
    cache = {"XDG_CACHE_HOME": str(cache_home)}
    first = rune(tmp_path, project, "endpoints", "--json", **cache)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)[0]["models_from"] == "models listed"
    kept = list((cache_home / "rune-council" / "endpoints").glob("models-lab-*.json"))
    assert len(kept) == 1 and json.loads(kept[0].read_text())["models"] == [LLAMA, QWEN]
    assert not (project / ".rune" / "endpoints").exists()

    # Asked again while it is down: the user's own list stands in, and says so.
    server.models_status = 500
    second = rune(tmp_path, project, "endpoints", "--json", "--refresh-models", **cache)
    [lab] = json.loads(second.stdout)
    assert lab["models_from"] == "stale model list cached"
    assert {m["model"] for m in lab["ranked"]} == {LLAMA, QWEN}
    assert server.models_calls == 2


def test_without_a_private_root_no_list_is_kept_anywhere(
    tmp_path: Path, server: OpenAIServer
) -> None:
    """Everything under pytest's tmp_path is below the shared /tmp: no directory there is
    private, so the list is fetched each time and written nowhere, the project included."""
    project = _project(tmp_path, server)
    shared_cache = tmp_path / "cache"  # what XDG_CACHE_HOME names, but others could write above
    for _ in range(2):
        ran = rune(tmp_path, project, "endpoints", XDG_CACHE_HOME=str(shared_cache))
        assert ran.returncode == 0, ran.stderr
    assert server.models_calls == 2
    assert not list(tmp_path.rglob("models-lab-*.json"))
