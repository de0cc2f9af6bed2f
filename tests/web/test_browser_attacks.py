"""A hostile web page in a real Chromium against a real ``rune council serve``.

Three pages: one on another loopback origin that fires every request a page can send
without permission (no-cors ``text/plain`` POSTs, a ``text/plain`` form, an urlencoded
form, CORS reads); one that is same-origin with the server as far as the browser knows
(DNS rebinding: ``attacker.example`` resolves to 127.0.0.1, and after the page has loaded
the port it came from is the server's); and the server's own page with a token required,
which must still sign in from the printed link and show the run.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import QUESTION
from tests.web.chromium import launched
from tests.web.serving import Server, free_port, install_voices, serving

SECRET = "SECRET-PLAN-b7d20a"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    # The rebinding page's name, answered without any resolver leaving the machine.
    with launched("--host-resolver-rules=MAP attacker.example 127.0.0.1") as chromium:
        yield chromium


class _Page(BaseHTTPRequestHandler):
    html = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(self.html)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(self.html)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class Attacker:
    """A plain web server on a loopback port that serves one hostile page."""

    def __init__(self, html: str, port: int | None = None) -> None:
        handler = type("Handler", (_Page,), {"html": html.encode()})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port or free_port()), handler)
        self.port: int = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(10)


def plant(server: Server) -> None:
    body = {
        "request": {
            "id": "planted",
            "question": QUESTION,
            "n": 3,
            "artifact": {"name": "plan.md", "text": f"The plan: {SECRET}"},
        }
    }
    assert server.post(body).status_code == 202
    server.wait_status("planted", {"complete", "failed"})


def assert_nothing_started(server: Server) -> None:
    files = sorted(p.name for p in server.council_dir.glob("run-*.json"))
    assert files == ["run-planted.json"], files
    health = server.client.get("/healthz").json()
    assert (health["running"], health["queued"]) == (0, 0)


CROSS_ORIGIN_PAGE = """<!doctype html><html><body>
<iframe name="sink1"></iframe><iframe name="sink2"></iframe>
<script>
const T = %(target)s;
const body = (id) => JSON.stringify({request: {id: id, question: "Take over?", n: 3}});
const out = {};
async function attempt(name, run) {
  try { out[name] = String(await run()); } catch (e) { out[name] = "refused: " + e; }
}
function form(target, enctype, name, value, id) {
  const f = document.createElement("form");
  f.method = "POST"; f.action = T + "/v1/councils"; f.enctype = enctype; f.target = target;
  const i = document.createElement("input");
  i.name = name; i.value = value; f.appendChild(i); document.body.appendChild(f); f.submit();
}
(async () => {
  await attempt("nocors-text", () => fetch(T + "/v1/councils", {method: "POST", mode: "no-cors",
    headers: {"Content-Type": "text/plain"}, body: body("evil1")}).then((r) => r.type));
  await attempt("nocors-none", () => fetch(T + "/v1/councils", {method: "POST", mode: "no-cors",
    body: new Blob([body("evil2")])}).then((r) => r.type));
  await attempt("beacon", () => navigator.sendBeacon(T + "/v1/councils", body("evil3")));
  await attempt("cors-json", () => fetch(T + "/v1/councils", {method: "POST",
    headers: {"Content-Type": "application/json"}, body: body("evil4")}).then((r) => r.status));
  await attempt("read-list", () => fetch(T + "/v1/councils").then((r) => r.text()));
  await attempt("read-run", () => fetch(T + "/v1/councils/planted").then((r) => r.text()));
  await attempt("nocors-read", () => fetch(T + "/v1/councils/planted", {mode: "no-cors"})
    .then((r) => r.type));
  // Sent as name=value: the "=" lands inside the question, and the body is valid JSON.
  form("sink1", "text/plain", '{"request": {"id": "evil5", "n": 3, "question": "Take over?', '"}}');
  form("sink2", "application/x-www-form-urlencoded", "request", body("evil6"));
  await new Promise((done) => setTimeout(done, 1500));
  window.__out = out;
})();
</script></body></html>"""


@pytest.mark.parametrize("origin_host", ["localhost", "127.0.0.1"])
def test_a_page_on_another_loopback_origin_can_neither_start_nor_read(
    tmp_path: Path, browser: Any, origin_host: str
) -> None:
    install_voices(tmp_path / "bin")
    with serving(tmp_path, "--yes") as server:
        plant(server)
        attacker = Attacker(CROSS_ORIGIN_PAGE % {"target": json.dumps(server.base)})
        try:
            page = browser.new_page()
            seen: list[tuple[str, int]] = []
            page.on(
                "response",
                lambda r: seen.append((r.url, r.status)) if r.url.startswith(server.base) else None,
            )
            page.goto(f"http://{origin_host}:{attacker.port}/")
            page.wait_for_function("window.__out !== undefined", timeout=20_000)
            out = page.evaluate("window.__out")
            # Give anything that did get through the time to be queued and written.
            time.sleep(1.5)
            assert_nothing_started(server)
            assert not any(SECRET in value for value in out.values()), out
            assert out["read-list"].startswith("refused") and out["read-run"].startswith("refused")
            # The requests did reach the server, which refused them.
            assert seen and all(status in (400, 403, 415) for _, status in seen), seen
            page.close()
        finally:
            attacker.close()


REBINDING_PAGE = """<!doctype html><html><body><script>
// Same origin as the server in the browser's eyes: relative URLs, readable answers.
window.__log = [];
const body = JSON.stringify({request: {id: "rebound", question: "Take over?", n: 3}});
async function poll() {
  for (const [how, init] of [["list", {}], ["run", {}],
      ["post", {method: "POST", headers: {"Content-Type": "application/json"}, body: body}]]) {
    const url = how === "run" ? "/v1/councils/planted" : "/v1/councils";
    try {
      const r = await fetch(url, Object.assign({cache: "no-store"}, init));
      window.__log.push([how, r.status, await r.text()]);
    } catch (e) { window.__log.push([how, 0, String(e)]); }
  }
}
setInterval(poll, 250);
</script></body></html>"""


def test_a_rebinding_page_reads_no_run_and_starts_no_council(tmp_path: Path, browser: Any) -> None:
    install_voices(tmp_path / "bin")
    attacker = Attacker(REBINDING_PAGE)
    port = attacker.port
    page = browser.new_page()
    try:
        page.goto(f"http://attacker.example:{port}/")
        page.wait_for_function("window.__log.length > 0", timeout=10_000)
    finally:
        # The name now answers with the user's server: the page keeps its origin.
        attacker.close()
    with serving(tmp_path, "--yes", port=port) as server:
        plant(server)
        page.evaluate("window.__log = []")
        page.wait_for_function("window.__log.filter((e) => e[1] !== 0).length >= 9", timeout=20_000)
        log = page.evaluate("window.__log")
        answered = [entry for entry in log if entry[1] != 0]
        assert not any(SECRET in text or QUESTION in text for _, _, text in log), answered[:3]
        assert {status for _, status, _ in answered} == {400}, answered[:3]
        assert all("is not a name this server answers to" in text for _, _, text in answered)
        assert_nothing_started(server)
    page.close()


def test_the_web_view_signs_in_with_the_token_link_and_still_shows_the_run(
    tmp_path: Path, browser: Any
) -> None:
    install_voices(tmp_path / "bin")
    with serving(tmp_path, "--yes") as server:
        plant(server)
    with serving(tmp_path, "--require-token") as server:
        token = (tmp_path / ".config" / "rune-council" / "serve-token").read_text().strip()
        context = browser.new_context()
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))

        page.goto(server.base + "/runs/planted")
        page.wait_for_selector("#login")
        assert SECRET not in page.content()
        page.fill("#token", "not-the-token")
        page.click("button[type=submit]")
        page.wait_for_selector("#problem:text('wrong token')")

        page.goto(f"{server.base}/#token={token}")
        page.wait_for_selector('tr[data-run="planted"]', timeout=15_000)
        assert "#token" not in page.url, "the token does not stay in the address bar"
        assert page.evaluate("document.cookie") == "", "the page's script cannot read the cookie"
        [cookie] = context.cookies()
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
        assert token not in cookie["value"]

        page.goto(server.base + "/runs/planted")
        page.wait_for_selector("#voices tr[data-voice]", timeout=15_000)
        assert page.inner_text("#question") == QUESTION
        assert page.get_attribute("#raw", "href") == "/v1/councils/planted"
        raw = page.evaluate("fetch('/v1/councils/planted').then((r) => r.text())")
        assert SECRET in raw
        assert errors == []
        context.close()

        # A page elsewhere in the same browser gets nothing, cookie or not.
        attacker = Attacker(CROSS_ORIGIN_PAGE % {"target": json.dumps(server.base)})
        try:
            context = browser.new_context()
            page = context.new_page()
            page.goto(f"{server.base}/#token={token}")
            page.wait_for_selector('tr[data-run="planted"]', timeout=15_000)
            page.goto(f"http://localhost:{attacker.port}/")
            page.wait_for_function("window.__out !== undefined", timeout=20_000)
            out = page.evaluate("window.__out")
            assert not any(SECRET in value for value in out.values()), out
            context.close()
        finally:
            attacker.close()
        assert_nothing_started(server)
