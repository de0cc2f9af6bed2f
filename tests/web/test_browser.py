"""The web view in a real headless Chromium (Debian's), driven by Playwright.

A council of slow fake voices is posted to a real server; the pages must follow it live,
without a reload, show the verdict, escape whatever markup a voice sends, load nothing from
outside the server, and stay readable at phone width. Screenshots go to test-output/web/.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.helpers import PLAN, QUESTION, ROLLBACK, answer, claim
from tests.web.chromium import SHOTS, open_page
from tests.web.serving import install_voices, serving

ARTIFACT = {"name": "plan.md", "text": PLAN}
XSS_STANCE = '<img src=x onerror="window.__xss=1">NO'
XSS_CLAIM = "<script>window.__xss=2</script>Rollback is <b>missing</b>"


def test_a_council_unfolds_live_in_the_browser(tmp_path: Path, browser: Any) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    hostile = answer(QUESTION, XSS_STANCE, [{**ROLLBACK, "text": XSS_CLAIM}, claim("Fine")])
    install_voices(tmp_path / "bin", sleeps=(1.5, 3.0, 4.5), gemini_text=hostile)
    with serving(tmp_path, "--yes") as server:
        opened = open_page(browser, server, "/", 1100)
        page, outside, errors = opened.page, opened.outside, opened.errors
        page.wait_for_selector("#empty:not([hidden])")
        page.evaluate("window.__same = true")
        assert (
            server.post(
                {"request": {"id": "live", "question": QUESTION, "artifact": ARTIFACT}}
            ).status_code
            == 202
        )
        # The list picks the new run up by itself.
        page.wait_for_selector('tr[data-run="live"]', timeout=10_000)
        assert page.evaluate("window.__same") is True
        page.screenshot(path=str(SHOTS / "list.png"), full_page=True)

        page.goto(server.base + "/runs/live")
        page.evaluate("window.__same = true")
        row = 'tr[data-voice="v3"]'
        page.wait_for_selector(f'{row}[data-status="running"]', timeout=15_000)
        timer = page.inner_text(f"{row} td.timer")
        page.wait_for_timeout(600)
        assert page.inner_text(f"{row} td.timer") != timer, "the running timer ticks"
        page.screenshot(path=str(SHOTS / "run-running.png"), full_page=True)
        page.wait_for_selector(f'{row}[data-status="complete"]', timeout=30_000)
        page.wait_for_selector("#stamp", timeout=15_000)
        assert page.evaluate("window.__same") is True, "no reload happened"

        assert page.inner_text("#stamp .stamp") == "MULTI_FAMILY"
        consensus = page.inner_text("#verdict .consensus")
        assert "The plan has no rollback step" in consensus  # claude's wording
        assert "Nothing says how to undo the migration" in consensus  # codex's wording
        assert "Needs decision" in page.inner_text("#verdict")
        assert "member" in page.inner_text("#metadata")
        assert page.get_attribute("#raw", "href") == "/v1/councils/live"

        # The hostile voice's markup is shown as text and never runs.
        body = page.inner_text("body")
        assert XSS_STANCE in body
        assert page.evaluate("window.__xss") is None
        assert (
            page.locator(
                "#voices img, #verdict img, #verdict script, #verdict b >> text=missing"
            ).count()
            == 0
        )
        page.screenshot(path=str(SHOTS / "run-done.png"), full_page=True)

        # Phone width: nothing scrolls sideways.
        phone = browser.new_page(viewport={"width": 375, "height": 800})
        phone.goto(server.base + "/runs/live")
        phone.wait_for_selector("#stamp")
        assert phone.evaluate("document.documentElement.scrollWidth") <= 375
        phone.screenshot(path=str(SHOTS / "run-phone.png"), full_page=True)
        phone.goto(server.base + "/")
        phone.wait_for_selector('tr[data-run="live"] .s-complete')
        assert phone.evaluate("document.documentElement.scrollWidth") <= 375
        phone.screenshot(path=str(SHOTS / "list-phone.png"), full_page=True)

        assert outside == [], "the pages load nothing from outside the server"
        assert errors == []
        page.close()
        phone.close()


def test_deliberation_tallies_and_rounds_are_shown(tmp_path: Path, browser: Any) -> None:
    from rune_council import CouncilOptions, FunctionRuntime, convene
    from tests.test_deliberation import request, three

    rune = tmp_path / ".rune"
    rounds = {"max_rounds": 2, "convergence_threshold": 1.0}
    # A chair that leaves a question open keeps the council going for a second round.
    chair = FunctionRuntime(
        lambda prompt: 'Verdict: add the rollback step.\nSYNTH open=["more?"]', name="chair"
    )
    ranked = convene(
        request("ranked", method="rank", rounds=rounds),
        CouncilOptions(runtimes=three(), rune_dir=rune, orchestrator=chair),
    )
    voted = convene(
        request("voted", method="vote"),
        CouncilOptions(runtimes=three(), rune_dir=rune),
    )
    assert ranked.deliberation is not None and ranked.deliberation.rank is not None
    assert voted.deliberation is not None and voted.deliberation.vote is not None
    with serving(tmp_path) as server:
        page = browser.new_page(viewport={"width": 1100, "height": 900})
        page.goto(server.base + "/runs/ranked")
        page.wait_for_selector("#stamp")
        verdict = page.inner_text("#verdict") + page.inner_text("#details")
        tally = ranked.deliberation.rank.tally
        assert "Ranking" in verdict and f"winner {tally.winner}" in verdict
        for score in tally.scores:
            assert f"{score.score:.2f}" in verdict
        assert "Rounds" in verdict
        shown_rounds = page.locator("#details h3:text('Rounds') + table tbody tr").count()
        assert shown_rounds == len(ranked.deliberation.rounds) == 2
        assert "Synthesis" in verdict
        page.screenshot(path=str(SHOTS / "run-ranked.png"), full_page=True)

        page.goto(server.base + "/runs/voted")
        page.wait_for_selector("#stamp")
        verdict = page.inner_text("#verdict") + page.inner_text("#details")
        vote = voted.deliberation.vote
        assert f"ballots counted {vote.denominator}" in verdict
        rows = page.locator("#details h3:text('Vote') + div + table tbody tr")
        assert rows.count() == len(vote.items)
        for i, item in enumerate(vote.items):
            row = rows.nth(i).inner_text()
            assert f"{len(item.yes)} / {len(item.no)} / {len(item.abstain)}" in row
            assert item.outcome in row
        page.screenshot(path=str(SHOTS / "run-voted.png"), full_page=True)
        page.close()
