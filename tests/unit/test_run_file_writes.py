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
