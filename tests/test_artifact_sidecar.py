"""A council writes its artifact once, beside the run file, not into every rewrite of it.

The run file is rewritten at every status change; since contract 2.8 the artifact lives in
``run-<id>.artifact`` (named after the run file alone), written once, and each version of
the run file records its length and sha256. Every reader that showed the artifact still
does (``show``, ``--json``, the HTTP API, MCP), ``verify`` still re-derives the run from
what is on disk, a sidecar that is missing, altered or planted as a symlink is named in one
line, and a run file written before 2.8, with the artifact inline, reads as it always did.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rune_council import CouncilOptions, convene
from rune_council.cli import app
from rune_council.core.contract import CouncilResult
from rune_council.core.errors import CouncilError
from rune_council.core.paths import RuneDir
from rune_council.runs import list_runs, load
from rune_council.testing import ScriptedRuntime, answer_for, claim_on
from rune_council.watch import follow

QUESTION = "Should we shard the orders table?"
MB = 1_000_000


def plan(size: int) -> str:
    """A numbered migration plan of about ``size`` bytes."""
    lines = []
    total = 0
    n = 1
    while total < size:
        line = f"Step {n}: move shard {n % 8} to the new cluster and compare the row counts.\n"
        lines.append(line)
        total += len(line)
        n += 1
    return "".join(lines)


def voices(artifact: str) -> list[ScriptedRuntime]:
    """Three families, each citing line 3 of the artifact with its words as the quote, so
    GATE can only verify the claims against the artifact itself."""
    cited = [claim_on(artifact, 3, "Step 3 moves a shard with no way back", name="plan.md")]
    return [
        ScriptedRuntime(answer_for(QUESTION, "NO, not yet", cited), name=name, family=family)
        for name, family in (("a", "anthropic"), ("b", "openai"), ("c", "google"))
    ]


def council(
    rune: Path, run_id: str, artifact: str | None, sizes: list[int] | None = None
) -> CouncilResult:
    request: dict[str, Any] = {"id": run_id, "question": QUESTION, "n": 3}
    if artifact is not None:
        request["artifact"] = {"name": "plan.md", "text": artifact}
    run_file = rune / "council" / f"run-{run_id}.json"

    def on_event(_result: CouncilResult, _event: Any) -> None:
        # Each event is one rewrite of the run file: its size as a reader would find it.
        if sizes is not None:
            sizes.append(run_file.stat().st_size)

    return convene(
        request,
        CouncilOptions(
            runtimes=voices(artifact or plan(400)), rune_dir=rune, overwrite=True, on_event=on_event
        ),
    )


def cli(*args: str) -> Any:
    return CliRunner().invoke(app, ["council", *args])


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One council with a 1 MB artifact, and the artifact."""
    rune = tmp_path_factory.mktemp("sidecar") / ".rune"
    text = plan(MB)
    council(rune, "big", text)
    return rune, text


def copy_run(rune: Path, run_id: str, new_id: str) -> Path:
    """Another run id holding the same run file and sidecar, for a test to spoil."""
    council_dir = rune / "council"
    for suffix in (".json", ".artifact"):
        source = council_dir / f"run-{run_id}{suffix}"
        if source.exists():
            (council_dir / f"run-{new_id}{suffix}").write_bytes(source.read_bytes())
    return council_dir / f"run-{new_id}.json"


def bytes_read() -> int:
    with open("/proc/self/io") as io:
        return next(int(line.split()[1]) for line in io if line.startswith("rchar:"))


# --------------------------------------------------------------------------- writing


def test_the_artifact_is_written_once_and_every_run_file_version_stays_small(
    tmp_path: Path,
) -> None:
    text = plan(MB)
    sizes: list[int] = []
    result = council(tmp_path, "once", text, sizes)
    sidecar = tmp_path / "council" / "run-once.artifact"

    assert len(sizes) >= 5  # dispatched, three voices, the result
    # Before: each version carried the artifact twice (the request's text and artifact_text).
    assert max(sizes) < 64_000, sizes
    assert sidecar.read_bytes() == text.encode()
    assert sum(sizes) + sidecar.stat().st_size < len(text) + 20 * max(sizes)
    assert stat.S_IMODE(sidecar.stat().st_mode) == 0o600
    on_disk = json.loads((tmp_path / "council" / "run-once.json").read_text())
    assert on_disk["artifact_text"] is None
    assert on_disk["request"]["artifact"]["text"] == ""
    assert on_disk["artifact_file"]["bytes"] == len(text.encode())
    # What the caller gets back is unchanged: the artifact, and no record of the sidecar.
    assert result.artifact_text == text
    assert result.request.artifact is not None and result.request.artifact.text == text
    assert result.artifact_file is None
    assert all(v.claims[0].evidence[0].verified == "true" for v in result.voices)


def test_a_20_mb_artifact_is_read_back_whole(tmp_path: Path) -> None:
    # Before, such a run file held 40 MB and was refused as larger than any run file.
    text = plan(20 * MB)
    council(tmp_path, "huge", text)
    assert (tmp_path / "council" / "run-huge.json").stat().st_size < 64_000
    assert load(tmp_path / "council" / "run-huge.json").artifact_text == text


def test_no_url_credential_reaches_the_sidecar(tmp_path: Path) -> None:
    text = plan(2000) + "Then fetch https://deploy:hunter2@internal.example/dump\n"
    council(tmp_path, "masked", text)
    kept = (tmp_path / "council" / "run-masked.artifact").read_text()
    assert "hunter2" not in kept and "https://[redacted]@internal.example/dump" in kept
    assert load(tmp_path / "council" / "run-masked.json").artifact_problem is None


def test_a_planted_symlink_sidecar_is_not_written_through(tmp_path: Path) -> None:
    precious = tmp_path / "precious.txt"
    precious.write_text("mine\n")
    council_dir = tmp_path / ".rune" / "council"
    council_dir.mkdir(parents=True)
    (council_dir / "run-planted.artifact").symlink_to(precious)
    with pytest.raises(CouncilError, match="symlink"):
        council(tmp_path / ".rune", "planted", plan(5000))
    assert precious.read_text() == "mine\n"


def test_a_rerun_without_an_artifact_leaves_no_sidecar_and_listings_ignore_sidecars(
    tmp_path: Path,
) -> None:
    council(tmp_path, "again", plan(5000))
    assert (tmp_path / "council" / "run-again.artifact").exists()
    rows = list_runs(RuneDir.resolve(tmp_path))
    assert [r.run_id for r in rows] == ["again"] and rows[0].problem is None
    stats = cli("stats", "--rune-dir", str(tmp_path), "--json")
    assert stats.exit_code == 0, stats.output
    files = json.loads(stats.output)["files"]
    assert (files["runs"], files["skipped"]) == (1, 0)
    council(tmp_path, "again", None)
    assert not (tmp_path / "council" / "run-again.artifact").exists()
    assert load(tmp_path / "council" / "run-again.json").artifact_text is None


# --------------------------------------------------------------------------- reading


def test_show_json_and_verify_read_the_artifact_back(fresh: tuple[Path, str]) -> None:
    rune, text = fresh
    shown = cli("show", "big", "--rune-dir", str(rune), "--json")
    assert shown.exit_code == 0, shown.output
    doc = json.loads(shown.output)
    assert doc["artifact_text"] == text and doc["request"]["artifact"]["text"] == text
    # The file's record of where the text came from, whose digest verify checks.
    assert doc["artifact_file"]["sha256"] == hashlib.sha256(text.encode()).hexdigest()
    checked = cli("verify", "big", "--rune-dir", str(rune))
    assert checked.exit_code == 0, checked.output
    assert "reproduced" in checked.output.splitlines()[0]
    assert "artifact_file" not in checked.output


def test_an_altered_sidecar_fails_verify_and_show_says_so(fresh: tuple[Path, str]) -> None:
    rune, _ = fresh
    path = copy_run(rune, "big", "altered")
    sidecar = path.with_suffix(".artifact")
    data = bytearray(sidecar.read_bytes())
    data[200] ^= 1  # one bit, same length
    sidecar.write_bytes(bytes(data))

    checked = cli("verify", str(path))
    assert checked.exit_code == 1, checked.output
    assert "NOT reproduced" in checked.output
    line = next(x for x in checked.output.splitlines() if x.startswith("  artifact_file:"))
    assert "does not match its digest" in line

    shown = cli("show", str(path))
    assert shown.exit_code == 0 and "Traceback" not in shown.output
    assert "NOT REPRODUCED" in shown.output.splitlines()[2]
    assert "artifact sidecar run-altered.artifact does not match its digest" in shown.output


def test_a_missing_sidecar_is_one_clear_line_not_a_crash(fresh: tuple[Path, str]) -> None:
    rune, _ = fresh
    path = copy_run(rune, "big", "missing")
    path.with_suffix(".artifact").unlink()
    shown = cli("show", str(path))
    assert shown.exit_code == 0, shown.output
    assert "artifact sidecar run-missing.artifact is missing" in shown.output
    checked = cli("verify", str(path), "--json")
    assert checked.exit_code == 1
    first = json.loads(checked.output)["differences"][0]
    assert first["field"] == "artifact_file" and "is missing" in first["recomputed"]


def test_a_planted_symlink_sidecar_is_refused_even_with_the_right_content(
    fresh: tuple[Path, str],
) -> None:
    rune, text = fresh
    path = copy_run(rune, "big", "linked")
    sidecar = path.with_suffix(".artifact")
    elsewhere = rune.parent / "elsewhere.txt"
    elsewhere.write_bytes(sidecar.read_bytes())  # the very bytes the digest names
    sidecar.unlink()
    sidecar.symlink_to(elsewhere)

    result = load(path)
    assert result.artifact_text is None
    assert result.artifact_problem is not None and "symlink" in result.artifact_problem
    checked = cli("verify", str(path))
    assert checked.exit_code == 1 and "symlink" in checked.output
    assert text[:40] not in cli("show", str(path), "--json").output


def test_a_run_file_written_before_the_sidecar_still_shows_and_verifies(
    fresh: tuple[Path, str],
) -> None:
    rune, text = fresh
    # The same run as a 2.7 writer left it: the artifact inline, twice, and no sidecar.
    old = load(rune / "council" / "run-big.json").model_dump(mode="json")
    old.update(schema_version="2.7", artifact_file=None, id="old")
    old["request"]["schema_version"] = "2.7"
    path = rune / "council" / "run-old.json"
    path.write_text(json.dumps(old, indent=2))

    shown = cli("show", str(path))
    assert shown.exit_code == 0, shown.output
    assert shown.output.splitlines()[2].startswith(
        "- **Verification**: reproduced from the recorded raw answers"
    )
    assert "artifact sidecar" not in shown.output
    assert cli("verify", str(path)).exit_code == 0
    assert load(path).artifact_text == text
    # And the new file of the same run is a small fraction of the old one.
    assert (rune / "council" / "run-big.json").stat().st_size * 20 < path.stat().st_size


def test_tailing_readers_do_not_read_the_artifact(fresh: tuple[Path, str], tmp_path: Path) -> None:
    # The bytes this process reads are counted by the kernel; rune's process-tree code needs
    # /proc as well, so a machine without it cannot run this suite honestly at all.
    assert Path("/proc/self/io").exists(), "no /proc/self/io: cannot count the bytes read"
    rune, _ = fresh
    alone = tmp_path / ".rune"
    (alone / "council").mkdir(parents=True)
    for suffix in (".json", ".artifact"):
        name = f"run-big{suffix}"
        (alone / "council" / name).write_bytes((rune / "council" / name).read_bytes())
    path = alone / "council" / "run-big.json"
    import watchfiles  # noqa: F401  (its first import would count as bytes read)

    before = bytes_read()
    updates = list(follow(path))
    rows = list_runs(RuneDir.resolve(alone))
    read = bytes_read() - before
    assert updates[-1].kind == "finished"
    assert [r.run_id for r in rows] == ["big"]
    # A watcher, the event stream and a listing read the run file, never its 1 MB sidecar.
    assert read < MB // 2, read


# --------------------------------------------------------------------------- other doors


def test_the_http_api_and_mcp_still_give_the_artifact(tmp_path: Path) -> None:
    from tests.mcp_client import connect, server_env
    from tests.web.serving import serving

    text = plan(200_000)
    council(tmp_path / ".rune", "door", text)
    assert len((tmp_path / ".rune" / "council" / "run-door.json").read_bytes()) < 64_000

    with serving(tmp_path) as server:
        response = server.client.get("/v1/councils/door")
        assert response.status_code == 200, response.text
        assert response.json()["artifact_text"] == text
        assert response.json()["request"]["artifact"]["text"] == text

    async def scenario() -> tuple[Any, str]:
        async with connect(tmp_path, "--yes", env=server_env(tmp_path)) as session:
            shown = await session.call_tool("show_run", {"run_id": "door"})
            resource = await session.read_resource("rune://runs/door")
        (content,) = resource.contents
        return shown, getattr(content, "text", "")

    shown, resource_text = asyncio.run(scenario())
    assert not shown.is_error
    assert shown.structured_content["artifact_text"] == text
    assert json.loads(resource_text)["artifact_text"] == text


def test_an_unreadable_sidecar_kind_is_named(fresh: tuple[Path, str]) -> None:
    rune, _ = fresh
    path = copy_run(rune, "big", "fifo")
    sidecar = path.with_suffix(".artifact")
    sidecar.unlink()
    os.mkfifo(sidecar)
    # A FIFO would block a plain read for ever; it is refused at once.
    result = load(path)
    assert result.artifact_problem is not None and "FIFO" in result.artifact_problem
