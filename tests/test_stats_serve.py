"""The web view's stats page and its API, against a real ``rune council serve``."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.stats_history import build_history
from tests.test_stats import PICTURE_SIZES, png_size
from tests.web.serving import base_env, serving


def test_stats_api_and_page_show_the_same_numbers_as_the_command(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    build_history(tmp_path / ".rune")
    with serving(tmp_path) as server:
        # A browser asks for all the pictures at once, before the server has drawn any.
        names = list(PICTURE_SIZES)
        with ThreadPoolExecutor(len(names)) as pool:
            first = list(
                pool.map(
                    lambda n: httpx.get(f"{server.base}/v1/stats/pictures/{n}", timeout=60), names
                )
            )
        assert [r.status_code for r in first] == [200] * len(names)
        assert [png_size(r.content) for r in first] == [PICTURE_SIZES[n] for n in names]
        stats = server.client.get("/v1/stats")
        assert stats.status_code == 200, stats.text
        data = stats.json()
        assert data["totals"]["consensus_rate"] == 0.75 and data["files"]["skipped"] == 2
        windowed = server.client.get("/v1/stats", params={"since": "2026-11-09"}).json()
        assert windowed["totals"]["runs"] == 2
        bad = server.client.get("/v1/stats", params={"since": "fortnight"})
        assert bad.status_code == 400 and "neither a span" in bad.json()["error"]

        view = server.client.get("/v1/stats/tables", params={"since": "2026-11-09"}).json()
        assert [t["title"] for t in view["tables"]][:2] == ["Runs", "Per week"]
        assert view["tables"][0]["rows"][0][3] == "50% (1/2)"
        assert [p["name"] for p in view["pictures"]] == list(PICTURE_SIZES)
        for p in view["pictures"]:
            assert p["url"].endswith("?since=2026-11-09")
            picture = server.client.get(p["url"])
            assert picture.headers["content-type"] == "image/png"
            assert png_size(picture.content)[0] >= 600
        assert server.client.get("/v1/stats/pictures/nope.png").status_code == 404

        page = server.client.get("/stats")
        assert page.status_code == 200 and "/assets/stats.js" in page.text
        assert "script-src 'self'" in page.headers["content-security-policy"]
        spec = server.client.get("/openapi.json").json()
        assert {"/v1/stats", "/v1/stats/tables", "/v1/stats/pictures/{name}"} <= set(spec["paths"])
        assert "Stats" in spec["components"]["schemas"]


def test_stats_pages_need_the_token_like_every_other_read(tmp_path: Path) -> None:
    build_history(tmp_path / ".rune")
    token = "t0ken-" + "x" * 30
    env = base_env(tmp_path, RUNE_COUNCIL_SERVE_TOKEN=token)
    with serving(tmp_path, host="0.0.0.0", env=env, token=token) as server:
        assert server.client.get("/v1/stats").status_code == 200
        bare = server.client.get("/v1/stats", headers={"Authorization": ""})
        assert bare.status_code == 401
        login = server.client.get("/stats", headers={"Authorization": ""})
        assert login.status_code == 200 and "stats.js" not in login.text
