"""What a web page could send to ``rune council serve`` on loopback, sent to a real server.

A page the user visits can aim requests at 127.0.0.1: with its own name re-resolved to
127.0.0.1 (DNS rebinding: the browser sends ``Host: attacker.example:PORT`` and lets the
page read the answer), with a foreign ``Origin``, or as a CORS-simple ``text/plain`` or
form POST that needs no preflight. None of them may start a council or read a run; the
server's own clients keep working. The browser itself is in tests/web/test_browser_attacks.py.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import httpx

from tests.helpers import QUESTION
from tests.web.serving import Server, base_env, free_port, install_voices, serving

SECRET = "SECRET-PLAN-4f1c9e"
EVIL = "evil"
RUN_ROUTES = (
    "/v1/councils",
    "/v1/councils/planted",
    "/v1/councils/planted/events",
    "/v1/stats",
    "/v1/stats/tables",
    "/v1/runtimes",
    "/runs/planted",
    "/",
)


def evil_body(run_id: str = EVIL) -> str:
    return json.dumps({"request": {"id": run_id, "question": QUESTION, "n": 3}})


def plant(server: Server) -> None:
    """A finished council whose artifact is the secret a hostile page is after."""
    body = {
        "request": {
            "id": "planted",
            "question": QUESTION,
            "n": 3,
            "artifact": {"name": "plan.md", "text": f"The plan: {SECRET}"},
        }
    }
    assert server.post(body).status_code == 202
    # How the voices fared does not matter: the artifact is in the run file either way.
    server.wait_status("planted", {"complete", "failed"})
    assert SECRET in json.dumps(server.run_file("planted"))


def port_of(server: Server) -> int:
    return int(server.base.rsplit(":", 1)[1])


def assert_nothing_started(server: Server) -> None:
    files = sorted(p.name for p in server.council_dir.glob("run-*.json"))
    assert files == ["run-planted.json"], files
    health = server.client.get("/healthz").json()
    assert (health["running"], health["queued"]) == (0, 0)


def get(server: Server, path: str, **headers: str) -> httpx.Response:
    # The events stream of a finished run ends at once, so a plain GET returns.
    return server.client.get(path, headers=headers, timeout=20)


def test_a_rebinding_host_reads_nothing_and_starts_nothing(tmp_path: Path) -> None:
    install_voices(tmp_path / "bin")
    with serving(tmp_path, "--yes") as server:
        plant(server)
        port = port_of(server)
        for host in (
            f"attacker.example:{port}",
            "attacker.example",
            "127.0.0.1",  # no port: not this server's authority
            "127.0.0.1:1",
            f"localhost.:{port}",
            f"0.0.0.0:{port}",
            f"127.0.0.1.nip.io:{port}",
        ):
            for path in (*RUN_ROUTES, "/healthz", "/openapi.json", "/assets/list.js"):
                r = get(server, path, Host=host)
                assert r.status_code == 400, (host, path, r.status_code)
                assert SECRET not in r.text and QUESTION not in r.text, (host, path)
                assert "--allow-host" in r.json()["error"]
            r = server.client.post(
                "/v1/councils",
                content=evil_body(),
                headers={"Host": host, "Content-Type": "application/json"},
            )
            assert r.status_code == 400, (host, r.text)
        assert_nothing_started(server)
        # The names the user's own browser uses still work.
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}"):
            r = get(server, "/v1/councils/planted", Host=host)
            assert r.status_code == 200 and SECRET in r.text, host


def test_a_foreign_origin_or_cross_site_fetch_is_refused(tmp_path: Path) -> None:
    install_voices(tmp_path / "bin")
    with serving(tmp_path, "--yes") as server:
        plant(server)
        port = port_of(server)
        other = free_port()
        for origin in (
            "http://attacker.example",
            f"http://attacker.example:{port}",
            f"http://localhost:{other}",
            f"http://127.0.0.1:{other}",
            "null",  # a sandboxed frame, a file:// page
        ):
            r = server.client.post(
                "/v1/councils",
                content=evil_body(),
                headers={"Origin": origin, "Content-Type": "application/json"},
            )
            assert r.status_code == 403, (origin, r.text)
            assert "Origin" in r.json()["error"]
            for path in RUN_ROUTES:
                r = get(server, path, Origin=origin)
                assert r.status_code == 403, (origin, path)
                assert SECRET not in r.text and QUESTION not in r.text
        # No Origin, but the browser says another site asked (a no-cors fetch, an <img>).
        for site in ("cross-site", "same-site"):
            for path in RUN_ROUTES:
                r = get(server, path, **{"Sec-Fetch-Site": site, "Sec-Fetch-Mode": "no-cors"})
                assert r.status_code == 403, (site, path)
                assert SECRET not in r.text
            r = get(
                server,
                "/runs/planted",
                **{
                    "Sec-Fetch-Site": site,
                    "Sec-Fetch-Mode": "navigate",
                    "Sec-Fetch-Dest": "iframe",
                },
            )
            assert r.status_code == 403
        assert_nothing_started(server)
        # Following a link from elsewhere opens the page (the linking page cannot read it).
        nav = {
            "Sec-Fetch-Site": "cross-site",
            "Sec-Fetch-Mode": "navigate",
            "Sec-Fetch-Dest": "document",
        }
        assert get(server, "/runs/planted", **nav).status_code == 200
        # The server's own pages send their own origin, under either loopback name.
        for n, origin in enumerate((f"http://127.0.0.1:{port}", f"http://localhost:{port}")):
            r = server.client.post(
                "/v1/councils",
                content=evil_body(f"own{n}"),
                headers={
                    "Origin": origin,
                    "Content-Type": "application/json",
                    "Sec-Fetch-Site": "same-origin",
                },
            )
            assert r.status_code == 202, (origin, r.text)
            got = get(
                server, "/v1/councils/planted", Origin=origin, **{"Sec-Fetch-Site": "same-origin"}
            )
            assert got.status_code == 200 and SECRET in got.text


def test_only_a_json_body_can_start_a_council(tmp_path: Path) -> None:
    install_voices(tmp_path / "bin")
    with serving(tmp_path, "--yes") as server:
        plant(server)
        # <form enctype="text/plain"> sends name=value; the "=" lands inside the question.
        text_form = '{"request": {"id": "evil", "n": 3, "question": "Take over?="}}\r\n'
        for ctype, body in (
            ("text/plain", evil_body()),  # fetch(..., {mode: "no-cors", body})
            ("text/plain;charset=UTF-8", evil_body()),
            ("text/plain", text_form),
            ("application/x-www-form-urlencoded", "request=%7B%7D"),
            ("multipart/form-data; boundary=x", "--x\r\n\r\n" + evil_body() + "\r\n--x--\r\n"),
            (None, evil_body()),  # navigator.sendBeacon with a string body is text/plain too
        ):
            headers = {"Content-Type": ctype} if ctype else {}
            r = server.client.post("/v1/councils", content=body, headers=headers)
            assert r.status_code == 415, (ctype, r.status_code, r.text)
            assert "application/json" in r.json()["error"]
        # A cancel is a POST too: a form cannot send one.
        r = server.client.post(
            "/v1/councils/planted/cancel", content="x", headers={"Content-Type": "text/plain"}
        )
        assert r.status_code == 415
        assert_nothing_started(server)
        r = server.client.post(
            "/v1/councils",
            content=evil_body("json"),
            headers={"Content-Type": "application/json; charset=utf-8"},
        )
        assert r.status_code == 202, r.text


def test_a_deep_nest_of_brackets_is_a_422_not_a_500(tmp_path: Path) -> None:
    with serving(tmp_path) as server:
        for body in ("[" * 400_000, '{"request": ' + "[" * 400_000, "{" * 200_000):
            r = server.client.post(
                "/v1/councils", content=body, headers={"Content-Type": "application/json"}
            )
            assert r.status_code == 422, (r.status_code, r.text[:200])
            problem = r.json()
            assert problem["error"].startswith("body: ") and "deeper" in problem["error"]
            assert problem["fields"][0]["field"] == "body"
        # The server is still there, and said nothing of a crash.
        assert server.client.get("/healthz").status_code == 200
        assert "Traceback" not in server.log.read_text()
        assert not server.council_dir.exists() or not list(server.council_dir.glob("*.json"))


def _serve(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``serve`` that is expected to refuse to start."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "rune_council.cli",
            "council",
            "serve",
            "--port",
            str(free_port()),
            *args,
        ],
        cwd=tmp_path,
        env=env or base_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_require_token_keeps_a_private_token_file_and_the_web_view_signs_in(tmp_path: Path) -> None:
    install_voices(tmp_path / "bin")
    token_file = tmp_path / ".config" / "rune-council" / "serve-token"
    with serving(tmp_path, "--yes") as server:
        plant(server)
    with serving(tmp_path, "--require-token") as server:
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        token = token_file.read_text().strip()
        assert len(token) >= 32
        # Not a terminal: the log names the file, never the token.
        log = server.log.read_text()
        assert str(token_file) in log and token not in log
        anon = httpx.Client(base_url=server.base, timeout=20)
        for path in ("/v1/councils", "/v1/councils/planted", "/v1/councils/planted/events"):
            r = anon.get(path)
            assert r.status_code == 401 and SECRET not in r.text, path
        assert (
            anon.post(
                "/v1/councils", content=evil_body(), headers={"Content-Type": "application/json"}
            ).status_code
            == 401
        )
        page = anon.get("/runs/planted")
        assert (
            page.status_code == 200 and "needs its token" in page.text and SECRET not in page.text
        )
        for wrong in ("nope", token + "x", ""):
            assert anon.post("/login", json={"token": wrong}).status_code == 401
        assert "set-cookie" not in anon.post("/login", json={"token": "nope"}).headers
        # The browser check comes first: a rebinding page cannot even try the token.
        r = anon.post(
            "/login", json={"token": token}, headers={"Host": f"attacker.example:{port_of(server)}"}
        )
        assert r.status_code == 400 and "set-cookie" not in r.headers
        signed = anon.post("/login", json={"token": token})
        assert signed.status_code == 204
        cookie = signed.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
        assert token not in cookie, "the cookie holds a session secret, not the token"
        assert SECRET in anon.get("/v1/councils/planted").text
        assert (
            anon.post(
                "/v1/councils", content=evil_body(), headers={"Content-Type": "application/json"}
            ).status_code
            == 401
        )
        bearer = {"Authorization": f"Bearer {token}"}
        assert SECRET in server.client.get("/v1/councils/planted", headers=bearer).text
        anon.close()
    # The same file, the same token, the next time; a session from before is void.
    with serving(tmp_path, "--require-token") as server:
        assert token_file.read_text().strip() == token
        again = httpx.Client(
            base_url=server.base,
            timeout=20,
            cookies={f"rune_council_session_{port_of(server)}": "stale"},
        )
        assert again.get("/v1/councils").status_code == 401
        again.close()
    assert not list(server.council_dir.glob(f"run-{EVIL}.json"))


def test_a_token_file_others_can_read_or_replace_is_refused(tmp_path: Path) -> None:
    mine = tmp_path / "token"
    mine.write_text("t" * 40 + "\n")
    mine.chmod(0o644)
    out = _serve(tmp_path, "--token-file", str(mine))
    assert out.returncode == 2 and "chmod 600" in out.stderr, out.stderr
    link = tmp_path / "link"
    mine.chmod(0o600)
    link.symlink_to(mine)
    out = _serve(tmp_path, "--token-file", str(link))
    assert out.returncode == 2 and "symlink" in out.stderr, out.stderr
    short = tmp_path / "short"
    short.write_text("abc\n")
    short.chmod(0o600)
    out = _serve(tmp_path, "--token-file", str(short))
    assert out.returncode == 2 and "too short" in out.stderr, out.stderr


def test_other_names_need_a_token_and_then_only_those_names_work(tmp_path: Path) -> None:
    for args in (
        ("--allow-host", "council.example"),
        ("--allow-origin", "https://council.example"),
        ("--host", "0.0.0.0"),
    ):
        out = _serve(tmp_path, *args)
        assert out.returncode == 2, (args, out.stderr)
        assert "token" in out.stderr and "--require-token" in out.stderr, out.stderr
    out = _serve(tmp_path, "--require-token", "--allow-origin", "https://council.example/path")
    assert out.returncode == 2 and "not one browser origin" in out.stderr
    token = "p" * 40
    env = base_env(tmp_path, RUNE_COUNCIL_SERVE_TOKEN=token)
    with serving(
        tmp_path,
        "--allow-host",
        "lan-box",
        "--allow-origin",
        "https://council.example",
        env=env,
        token=token,
    ) as server:
        port = port_of(server)
        for host in (f"lan-box:{port}", "lan-box", "council.example"):
            assert get(server, "/v1/councils", Host=host).status_code == 200, host
        assert get(server, "/v1/councils", Host=f"attacker.example:{port}").status_code == 400
        ok = get(server, "/v1/councils", Host="council.example", Origin="https://council.example")
        assert ok.status_code == 200
        bad = get(server, "/v1/councils", Host="council.example", Origin="https://attacker.example")
        assert bad.status_code == 403
    # Listening on every address still answers only to the names it was given.
    with serving(tmp_path, host="0.0.0.0", env=env, token=token) as server:
        port = port_of(server)
        assert get(server, "/v1/councils", Host=f"attacker.example:{port}").status_code == 400
        assert get(server, "/v1/councils").status_code == 200


def test_the_token_file_is_made_private_inside_a_private_directory(tmp_path: Path) -> None:
    config = tmp_path / "cfg"
    env = base_env(tmp_path, RUNE_COUNCIL_CONFIG_DIR=str(config))
    old = os.umask(0)
    try:
        with serving(tmp_path, "--require-token", env=env):
            pass
    finally:
        os.umask(old)
    made = config / "serve-token"
    assert stat.S_IMODE(made.stat().st_mode) == 0o600
    assert stat.S_IMODE(config.stat().st_mode) & 0o077 == 0
