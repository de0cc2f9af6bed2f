"""The run page leads with the answer and never looks finished before it is.

Real run files (tests/web/planted_runs.py) are served by a real ``rune council serve`` and read
in Debian's Chromium at desktop (1280 px) and phone (375 px) width. Screenshots go to
test-output/web/.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.web import planted_runs
from tests.web.chromium import SHOTS, open_page
from tests.web.serving import Server, serving

WIDTHS = {"desktop": 1280, "phone": 375}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    home = tmp_path_factory.mktemp("runpage")
    rune = home / ".rune"
    planted_runs.mid_round(rune)
    planted_runs.halted(rune)
    planted_runs.empty(rune)
    planted_runs.partial(rune)
    planted_runs.demo(rune)
    SHOTS.mkdir(parents=True, exist_ok=True)
    with serving(home) as running:
        yield running


def tops(page: Any, *selectors: str) -> list[float]:
    """Where each section starts on the page, read in one go: the page redraws itself on
    every event of the run's stream, so separate reads could straddle two drawings."""
    found: list[float | None] = page.evaluate(
        """(selectors) => selectors.map((s) => {
            const node = document.querySelector(s);
            if (!node || !node.getClientRects().length) return null;
            return node.getBoundingClientRect().top + window.scrollY;
        })""",
        list(selectors),
    )
    missing = [s for s, y in zip(selectors, found, strict=True) if y is None]
    assert not missing, f"not shown: {missing}"
    return [y for y in found if y is not None]


def in_order(page: Any, *selectors: str) -> bool:
    found = tops(page, *selectors)
    return found == sorted(found)


@pytest.mark.parametrize("kind", list(WIDTHS))
def test_mid_round_the_page_shows_the_round_and_no_verdict(
    server: Server,
    browser: Any,
    kind: str,
) -> None:
    on_disk = server.run_file("midround")
    # What the page is given: round 1 arbitrated (a stamp in the file), round 2 running.
    assert on_disk["status"] == "running" and on_disk["decorrelation"] == "MULTI_FAMILY"
    assert len(on_disk["deliberation"]["rounds"]) == 1
    opened = open_page(browser, server, "/runs/midround", WIDTHS[kind])
    page = opened.page
    page.wait_for_selector("#progress:not([hidden]) #round")
    assert page.inner_text("#round") == "round 2 of 2"
    assert "0 of 3 voices have finished this round." in page.inner_text("#progress")
    assert "No verdict yet" in page.inner_text("#progress")
    # Round 1's stamp and dissent are not shown as the council's answer.
    assert page.locator("#verdict").is_hidden()
    assert page.locator("#stamp, #dissent, #bottom-line").count() == 0
    assert "MULTI_FAMILY" not in page.inner_text("main")
    # The progress comes before the voices at work.
    assert in_order(page, "#progress", "#voices")
    assert page.locator('#voices tr[data-voice="v1"][data-status="running"]').count() == 1
    page.screenshot(path=str(SHOTS / f"runpage-midround-{kind}.png"), full_page=True)
    opened.close()


@pytest.mark.parametrize("kind", list(WIDTHS))
def test_a_finished_run_leads_with_the_stamp_and_bottom_line_then_dissent_by_kind(
    server: Server,
    browser: Any,
    kind: str,
) -> None:
    on_disk = server.run_file("demo")
    [dissenter] = on_disk["verdict"]["dissenting_members"]
    opened = open_page(browser, server, "/runs/demo", WIDTHS[kind])
    page = opened.page
    page.wait_for_selector("#stamp")
    assert page.inner_text("#stamp .stamp") == "MULTI_FAMILY"
    # Stamp, then the bottom line (consensus and the decision), then dissent, then voices.
    assert in_order(
        page, "#stamp", "#bottom-line", "#needs-decision", "#dissent", "#voices", "#details"
    )
    consensus = on_disk["agreement"]["consensus_claims"][0]["claim"]
    assert consensus in page.inner_text("#bottom-line")
    assert page.locator("#needs-decision").inner_text().startswith("Yes")

    # Dissent in groups, one kind each, the most decisive kind first.
    groups = page.locator("#dissent details.dissent-group")
    kinds = [groups.nth(i).get_attribute("data-kind") for i in range(groups.count())]
    recorded = {d["label"] for d in on_disk["agreement"]["dissent"]}
    assert set(kinds) == recorded and len(kinds) == len(recorded)
    assert kinds.index("disagreement") < kinds.index("single-voice")
    for i, kind_name in enumerate(kinds):
        cards = groups.nth(i).locator(".card.dissent")
        expected = [d for d in on_disk["agreement"]["dissent"] if d["label"] == kind_name]
        assert cards.count() == len(expected)
        assert {cards.nth(j).get_attribute("data-kind") for j in range(cards.count())} == {
            kind_name
        }

    # The dissenting member stands out: its row, and its id wherever dissent names it.
    row = page.locator(f'#voices tr[data-voice="{dissenter}"]')
    assert row.get_attribute("data-dissenter") == "true"
    assert "dissenter" in row.inner_text()
    others = page.locator('#voices tr[data-voice][data-dissenter="true"]')
    assert others.count() == 1
    shade = row.locator("td").first.evaluate("c => getComputedStyle(c).backgroundColor")
    plain = page.locator(f'#voices tr[data-voice]:not([data-voice="{dissenter}"]) td').first
    assert shade != plain.evaluate("c => getComputedStyle(c).backgroundColor")
    chips = page.locator("#dissent .voice-chip.dissenter")
    assert chips.count() >= 2 and set(chips.all_inner_texts()) == {dissenter}
    page.screenshot(path=str(SHOTS / f"runpage-demo-{kind}.png"), full_page=True)
    opened.close()


@pytest.mark.parametrize("kind", list(WIDTHS))
def test_halted_empty_and_partial_runs_say_so_beside_the_stamp(
    server: Server,
    browser: Any,
    kind: str,
) -> None:
    opened = open_page(browser, server, "/runs/halted", WIDTHS[kind])
    page = opened.page
    page.wait_for_selector("#stamp")
    halted = page.inner_text('#stamp [data-qualifier="halted"]')
    assert halted.startswith("halted after round 2 of 3")
    assert page.locator("#needs-decision").inner_text().startswith("Yes")
    assert "Deliberation halted after round 2" in page.inner_text("#needs-decision")
    assert in_order(page, "#stamp", "#bottom-line", "#dissent")
    page.screenshot(path=str(SHOTS / f"runpage-halted-{kind}.png"), full_page=True)
    opened.close()

    opened = open_page(browser, server, "/runs/empty", WIDTHS[kind])
    page = opened.page
    page.wait_for_selector("#stamp")
    assert page.inner_text("#stamp .stamp") == "NO VERDICT"
    assert "0 of 3 valid" in page.inner_text('#stamp [data-qualifier="empty"]')
    assert page.inner_text("#bottom-line .headline").startswith("No voice answered")
    assert "no verdict" in page.inner_text("#summary")
    page.screenshot(path=str(SHOTS / f"runpage-empty-{kind}.png"), full_page=True)
    opened.close()

    opened = open_page(browser, server, "/runs/partial", WIDTHS[kind])
    page = opened.page
    page.wait_for_selector("#stamp")
    assert page.inner_text("#stamp .stamp") == "MULTI_FAMILY"
    assert "0.5 s deadline" in page.inner_text('#stamp [data-qualifier="partial"]')
    opened.close()


@pytest.mark.parametrize("kind", list(WIDTHS))
def test_the_list_marks_halted_and_empty_runs(
    server: Server,
    browser: Any,
    kind: str,
) -> None:
    listed = {r["id"]: r for r in server.client.get("/v1/councils?limit=100").json()["items"]}
    assert listed["halted"]["halted"] is True
    assert not any(listed[r]["halted"] for r in ("demo", "partial", "empty", "midround"))
    opened = open_page(browser, server, "/", WIDTHS[kind])
    page = opened.page
    page.wait_for_selector('tr[data-run="demo"]')
    assert page.inner_text('tr[data-run="halted"] [data-mark="halted"]') == "halted"
    assert page.inner_text('tr[data-run="empty"] [data-mark="empty"]') == "no verdict"
    # An empty run is not shown as a plain complete one, nor with a stamp.
    empty_row = page.locator('tr[data-run="empty"]')
    assert empty_row.locator(".s-complete").count() == 0
    assert "NO_DECORRELATION" not in empty_row.inner_text()
    for plain_run in ("demo", "partial"):
        assert page.locator(f'tr[data-run="{plain_run}"] [data-mark]').count() == 0
    # A running council's stamp (round 1's, here) is not shown as if it were its verdict.
    midround = page.locator('tr[data-run="midround"]')
    assert midround.locator(".s-running").count() == 1
    assert "MULTI_FAMILY" not in midround.inner_text()
    page.screenshot(path=str(SHOTS / f"runpage-list-{kind}.png"), full_page=True)
    opened.close()
