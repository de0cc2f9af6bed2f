"""Run-file rewrites: the credential mask searches less but masks the same; only a run's
first and final versions pay for an fsync."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rune_council import files
from rune_council.core.contract import CouncilResult, PerspectiveRequest
from rune_council.core.safetext import URL_USERINFO, mask_url_credentials
from rune_council.recorder import RunRecorder

# Pieces that make URLs with and without credentials, near-misses and odd whitespace.
PIECES = st.sampled_from(
    [
        "http",
        "https",
        "git+ssh",
        "x_http",
        "9ftp",
        "://",
        ":/",
        "@",
        "user",
        ":pw",
        "host",
        "/path",
        "?q=1",
        "#frag",
        '"',
        "'",
        " ",
        "\n",
        "\t",
        "\u00a0",
        "\u2003",
        "é",
        "a.b-c",
        "[",
        "]",
        "é://",
        "mailto:",
        "::",
        "//@",
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(PIECES, max_size=30).map("".join))
def test_the_mask_changes_exactly_what_the_whole_text_pattern_changes(text: str) -> None:
    assert mask_url_credentials(text) == URL_USERINFO.sub(r"\1[redacted]@", text)


def test_the_mask_redacts_every_credential_in_a_large_document() -> None:
    text = "\n".join(
        f'  "line {i}": "see https://user{i}:secret{i}@example.org/x and ftp://anon@h"'
        for i in range(2000)
    )
    masked = mask_url_credentials(text)
    assert "secret" not in masked and "anon@" not in masked
    assert masked.count("https://[redacted]@example.org") == 2000
    assert masked == URL_USERINFO.sub(r"\1[redacted]@", text)


def _result(status: str) -> CouncilResult:
    return CouncilResult(
        id="writes",
        question="Ship it?",
        mode="critique",
        voices_requested=3,
        request=PerspectiveRequest(id="writes", question="Ship it?"),
        status=status,  # type: ignore[arg-type]
        started_at="2026-01-01T00:00:00.000+00:00",
    )


def test_only_the_first_and_the_final_versions_are_fsynced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(files.os, "fsync", counting_fsync)
    path = tmp_path / "council" / "run-writes.json"
    recorder = RunRecorder(path)
    recorder.write(_result("running"))
    assert len(synced) == 1  # the file is new: a started run must survive a crash
    for _ in range(5):
        recorder.write(_result("running"))
    assert len(synced) == 1
    recorder.write(_result("complete"))
    assert len(synced) == 2
    assert CouncilResult.model_validate_json(path.read_bytes()).status == "complete"
    assert recorder.writes == 7
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left


def test_changes_made_in_one_pass_of_the_loop_become_one_version_with_all_of_them(
    tmp_path: Path,
) -> None:
    import asyncio

    path = tmp_path / "council" / "run-writes.json"
    recorder = RunRecorder(path)

    async def main() -> None:
        result = _result("running")
        recorder.write(result)  # the first version, on disk at once
        for i in range(5):  # five voices started in one pass
            result.notes.append(f"voice {i} started")
            recorder.write(result)
        assert recorder.writes == 1  # made once the loop gets back to waiting
        await asyncio.sleep(0)
        assert recorder.writes == 2
        recorder.flush()
        on_disk = CouncilResult.model_validate_json(path.read_bytes())
        assert on_disk.notes == [f"voice {i} started" for i in range(5)]
        result.notes.append("last change")
        recorder.write(result)
        result.status = "complete"  # type: ignore[assignment]
        recorder.write(result)  # the final version supersedes the one still waiting
        await asyncio.sleep(0)

    asyncio.run(main())
    recorder.flush()
    on_disk = CouncilResult.model_validate_json(path.read_bytes())
    assert on_disk.status == "complete" and on_disk.notes[-1] == "last change"
    assert recorder.writes == 3
