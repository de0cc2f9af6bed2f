"""The absence-aware threshold and ballot reading, as a member of the council would see them."""

from __future__ import annotations

import pytest

from rune_council.core.contract import AbsentMember, ConsolidatedItem
from rune_council.deliberation.vote import count_votes, read_ballot, required_yes


def _items(k: int) -> list[ConsolidatedItem]:
    return [
        ConsolidatedItem(number=i, text=f"item {i}", sources=[f"v{i}.c1"], voice_ids=[f"v{i}"])
        for i in range(1, k + 1)
    ]


@pytest.mark.parametrize(
    ("threshold", "denominator", "need"),
    [
        (2 / 3, 6, 4),  # six answerers at 2/3: four yes
        (2 / 3, 4, 3),  # four answerers at 2/3: ceil(8/3) = 3 (the seed's "2" breaks its rule)
        (2 / 3, 3, 2),
        (0.7, 10, 7),  # 0.7 x 10 is 7 exactly, not 7.000...1 rounded up to 8
        (0.5, 5, 3),
        (1.0, 4, 4),
        (2 / 3, 0, 0),
    ],
)
def test_required_yes(threshold: float, denominator: int, need: int) -> None:
    assert required_yes(threshold, denominator) == need


def test_failed_members_leave_the_denominator_and_unvoted_items_are_reported() -> None:
    items = _items(3)
    choices = {
        "v1": {1: "yes", 2: "no"},
        "v2": {1: "yes", 2: "yes"},
        "v3": {1: "no", 2: "yes"},
        "v4": {1: "yes", 2: "abstain"},
    }
    absent = [
        AbsentMember(voice_id="v5", runtime="gemini", stage="ballot", reason="timeout"),
        AbsentMember(voice_id="v6", runtime="qwen", stage="answer", reason="malformed"),
    ]
    result = count_votes(items, choices, 2 / 3, absent=absent)
    assert result.denominator == 4 and result.counted == ["v1", "v2", "v3", "v4"]
    assert [i.required for i in result.items] == [3, 3, 3]
    assert [i.outcome for i in result.items] == ["passed", "failed", "unvoted"]
    assert result.items[1].yes == ["v2", "v3"] and result.items[1].abstain == ["v4"]
    assert result.unvoted == [3]
    assert [a.voice_id for a in result.absent] == ["v5", "v6"]


def test_no_ballot_counted_means_every_item_unvoted_not_rejected() -> None:
    result = count_votes(_items(2), {}, 2 / 3)
    assert result.denominator == 0 and [i.outcome for i in result.items] == ["unvoted", "unvoted"]


def test_ballot_reading_drops_what_is_not_a_vote() -> None:
    text = """Here are my votes:
```
VOTE -> 1 yes "it is the main risk"
VOTE -> 1 no
ABSTAIN -> 2
VOTE -> 9 yes
RANK A>B
```
"""
    choices, dropped = read_ballot("v1", text, [1, 2])
    assert choices == {1: "yes", 2: "abstain"}
    reasons = [d.reason for d in dropped]
    assert "a second vote on item 1" in reasons
    assert "there is no item 9" in reasons
    assert "RANK is not a vote" in reasons
    assert any("no verb" in r for r in reasons)  # the prose line
    assert all(d.source == "v1" for d in dropped)
