from __future__ import annotations

from rune_council.deliberation.consolidate import deterministic_merge
from rune_council.stages.normalize import normalize
from tests.helpers import answer, claim, gated_voice

Q = "Should we shard the orders table?"


def test_word_for_word_identical_proposals_become_one_ballot_item() -> None:
    voices = [
        gated_voice("v1", "anthropic", answer(Q, "NO", [claim("Archive old orders first.")])),
        gated_voice("v2", "openai", answer(Q, "NO", [claim("archive old orders first")])),
        gated_voice("v3", "google", answer(Q, "NO", [claim("Archive the oldest orders first")])),
    ]
    norm = normalize(voices, None, None)
    items = deterministic_merge(norm.voices, norm.clusters)
    texts = [i.text for i in items]
    assert texts[0].startswith("NO:")
    merged = next(i for i in items if i.text == "Archive old orders first.")
    assert merged.voice_ids == ["v1", "v2"] and len(merged.sources) == 2
    # Similar but not identical wording stays a separate item.
    assert "Archive the oldest orders first" in texts
    assert len(items) == 3
