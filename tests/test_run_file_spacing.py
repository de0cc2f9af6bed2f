"""A council's intermediate run-file versions are spaced: a burst of changes on the loop
becomes one version holding all of them, a change after a quiet moment is made once the
loop has finished its pass, and no change waits longer than the spacing."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rune_council import recorder as recorder_module
from rune_council.core.contract import CouncilResult, PerspectiveRequest
from rune_council.recorder import RunRecorder

# Wide enough that no pass of the loop on a busy machine takes it.
SPACING_S = 0.4


def _result() -> CouncilResult:
    return CouncilResult(
        id="spacing",
        question="Ship it?",
        mode="critique",
        voices_requested=3,
        request=PerspectiveRequest(id="spacing", question="Ship it?"),
        status="running",
        started_at="2026-01-01T00:00:00.000+00:00",
    )


def _notes_on_disk(path: Path) -> list[str]:
    return CouncilResult.model_validate_json(path.read_bytes()).notes


def test_a_burst_of_changes_is_one_version_and_reaches_the_file_within_the_spacing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(recorder_module, "VERSION_SPACING_S", SPACING_S)
    path = tmp_path / "council" / "run-spacing.json"
    recorder = RunRecorder(path)

    async def main() -> None:
        result = _result()
        recorder.write(result)  # the first version, on disk at once
        result.notes.append("voice 1 ended")
        recorder.write(result)
        await asyncio.sleep(0)
        assert recorder.writes == 2  # after a quiet moment: made once the pass is over
        for i in range(2, 6):  # the stage's other voices end one after another
            result.notes.append(f"voice {i} ended")
            recorder.write(result)
            await asyncio.sleep(0)
        assert recorder.writes == 2  # too soon after the last version
        await asyncio.sleep(SPACING_S * 3)
        assert recorder.writes == 3  # one version for the whole burst
        recorder.flush()
        assert _notes_on_disk(path) == [f"voice {i} ended" for i in range(1, 6)]
        result.notes.append("the round closed")
        recorder.write(result)
        result.status = "complete"  # type: ignore[assignment]
        recorder.write(result)  # the final version: at once, superseding the waiting one
        assert recorder.writes == 4
        assert _notes_on_disk(path)[-1] == "the round closed"
        await asyncio.sleep(SPACING_S * 3)
        assert recorder.writes == 4  # nothing was left to write after it

    asyncio.run(main())
    on_disk = CouncilResult.model_validate_json(path.read_bytes())
    assert on_disk.status == "complete"
