"""Every door asks the same council for the same ask.

One ask (a question, a template, mode, n, an artifact, rounds and their policy, preferred
families, a timeout and a deadline) goes in through each door as its user sends it: the CLI
as flags (`rune council ...`, a real process), HTTP as a JSON body (a real `rune council
serve` on loopback), a batch as a JSONL line (`rune council batch`, a real process), and MCP
as the convene tool's keys or as a host's `/rune council` line (a real `rune council mcp`,
called by the SDK's client), with fake AI CLIs answering. Each run file must record the
same request and seat the same voices, the run id and the times aside.

A door joins by adding an entry to ``DOORS``: a function that runs the ask through it and
returns the id of the run file it wrote.
"""

from __future__ import annotations

import asyncio
import json
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import ASK, ASK_FLAGS
from tests.test_intake import council_as_seen, env_for, project, recorded, run, rune
from tests.web.serving import ROOT, serving

Door = Callable[[Path], str]


def by_cli(work: Path) -> str:
    out = rune(work, *ASK_FLAGS, "--id", "by-cli", "--yes", "--json")
    assert out.returncode in (0, 1), out.stderr
    return "by-cli"


def by_http(work: Path) -> str:
    env = {**env_for(work), "PYTHONPATH": str(ROOT)}
    with serving(work, "--yes", "--artifact-root", str(work), env=env) as server:
        body = {**ASK, "id": "by-http"}
        reply = server.post(body)
        assert reply.status_code == 202, reply.text
        server.wait_status("by-http", {"complete", "failed"}, timeout=120)
    return "by-http"


def by_batch(work: Path) -> str:
    items = work / "items.jsonl"
    items.write_text(json.dumps({**ASK, "id": "by-batch"}) + "\n", encoding="utf-8")
    out = run(
        work,
        *("-m", "rune_council.cli", "council", "batch", str(items)),
        *("--yes", "--json"),
    )
    assert out.returncode in (0, 1), out.stderr
    [row] = [json.loads(line) for line in out.stdout.splitlines()]
    assert row["status"] in ("complete", "failed"), row
    return "by-batch"


def _convene(work: Path, arguments: dict[str, Any]) -> None:
    """The convene tool of a real `rune council mcp`, called by the official client."""
    from tests.mcp_client import connect, text_of

    async def call() -> None:
        async with connect(work, "--yes", env=env_for(work)) as session:
            result = await session.call_tool("convene", arguments)
            assert not result.is_error, text_of(result)

    asyncio.run(call())


def by_mcp(work: Path) -> str:
    _convene(work, {**ASK, "id": "by-mcp"})
    return "by-mcp"


def by_host(work: Path) -> str:
    # `/rune council <the same flags>` in a host: the line after `council`, as typed.
    _convene(work, {"arguments": shlex.join([*ASK_FLAGS, "--id", "by-host"])})
    return "by-host"


DOORS: list[tuple[str, Door]] = [
    ("http", by_http),
    ("batch", by_batch),
    ("mcp", by_mcp),
    ("host", by_host),
]
# A door that knows who granted consent says so in its own words.
CONSENT = {door: "granted (rune council mcp --yes)" for door in ("mcp", "host")}


@pytest.fixture(scope="module")
def councils(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """The run file each door wrote for the ask, all in one project, the CLI's first."""
    work = project(tmp_path_factory.mktemp("doors"))
    # Detected once before any door runs, so every council reads the same detection (a
    # batch detects once for all its councils, whatever the door before it did).
    detect = rune(work, "detect", "--refresh")
    assert detect.returncode == 0, detect.stderr
    written = {"cli": by_cli(work)}
    for name, door in DOORS:
        written[name] = door(work)
    return {name: recorded(work, run_id) for name, run_id in written.items()}


@pytest.mark.parametrize("door", [name for name, _ in DOORS])
def test_a_door_records_the_request_the_cli_records(
    councils: dict[str, dict[str, Any]], door: str
) -> None:
    cli, other = councils["cli"], councils[door]
    assert {k: v for k, v in other["request"].items() if k != "id"} == {
        k: v for k, v in cli["request"].items() if k != "id"
    }
    # The ask as each door's user gave it, applied the one way.
    request = cli["request"]
    assert request["template"]["name"] == "security-review"
    assert (request["mode"], request["n"]) == ("critique", 4)
    assert request["artifact"]["path"].endswith("/plan.md")
    rounds = request["deliberation"]["rounds"]
    assert (rounds["max_rounds"], rounds["on_divergence"]) == (2, "halt")
    assert request["budget"] == {**request["budget"], "per_voice_timeout_s": 60, "deadline_s": 90}
    assert request["diversity"]["prefer_model_families"] == ["google"]


@pytest.mark.parametrize("door", [name for name, _ in DOORS])
def test_a_door_convenes_the_council_the_cli_convenes(
    councils: dict[str, dict[str, Any]], door: str
) -> None:
    cli, other = councils["cli"], councils[door]
    seen, expected = council_as_seen(other), council_as_seen(cli)
    if door in CONSENT:
        assert seen.pop("consent") == CONSENT[door]
        expected.pop("consent")
    # Voices (who, which family, which role, how it ended), consent, notes, verdict.
    assert seen == expected
    assert len(cli["voices"]) == 4 and cli["runtime_report"]["consent"]
