"""The HTTP API against a real ``rune council serve`` on a loopback port, fake CLIs as voices."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import jsonschema
import psutil

from tests.helpers import QUESTION, council_result_schema
from tests.web.serving import base_env, free_port, install_voices, serving, sse, start

SCHEMA = council_result_schema()


def ask(run_id: str | None = None, **overrides: object) -> dict[str, object]:
    request: dict[str, object] = {"question": QUESTION, "n": 3}
    if run_id:
        request["id"] = run_id
    return {"request": request, **overrides}


def test_a_posted_council_streams_every_transition_and_ends_complete(tmp_path: Path) -> None:
    install_voices(tmp_path / "bin", sleeps=(0.3, 0.6, 0.9))
    with serving(tmp_path, "--yes") as server:
        r = server.post(ask("first", timeout=30))
        assert r.status_code == 202, r.text
        assert r.headers["location"] == "/v1/councils/first"
        assert r.json()["id"] == "first"
        frames = sse(server.client, "first")
        kinds = [f[0] for f in frames]
        assert kinds[-1] == "end" and frames[-1][2]["status"] == "complete"
        ids = [int(f[1]) for f in frames if f[0] == "transition"]
        doc = server.client.get("/v1/councils/first").json()
        assert ids == [e["seq"] for e in doc["events"]], "one frame per run-file event, in order"
        voice_events = [f[2] for f in frames if f[0] == "transition" and f[2]["voice_id"]]
        assert {(e["voice_id"], e["status"]) for e in voice_events} >= {
            ("v1", "running"),
            ("v1", "complete"),
            ("v3", "complete"),
        }
        assert doc["status"] == "complete" and doc["decorrelation"] == "MULTI_FAMILY"
        assert doc["request"]["budget"]["per_voice_timeout_s"] == 30  # the override
        on_disk = server.run_file("first")
        jsonschema.validate(on_disk, SCHEMA)
        assert on_disk == doc


def test_reconnecting_with_last_event_id_loses_and_repeats_nothing(tmp_path: Path) -> None:
    install_voices(tmp_path / "bin", sleeps=(0.5, 1.0, 1.5))
    with serving(tmp_path, "--yes") as server:
        assert server.post(ask("resume")).status_code == 202
        first = sse(server.client, "resume", limit=2)
        seen = [int(f[1]) for f in first if f[0] == "transition"]
        assert len(seen) == 2
        rest = sse(server.client, "resume", last_id=seen[-1])
        later = [int(f[1]) for f in rest if f[0] == "transition"]
        assert rest[-1][0] == "end"
        final = [e["seq"] for e in server.run_file("resume")["events"]]
        assert seen + later == final


def test_bad_bodies_are_422_naming_the_field(tmp_path: Path) -> None:
    with serving(tmp_path) as server:
        cases = {
            "request.question": {"request": {"n": 3}},
            "n": ask(n=1),
            "mode": ask(mode="shout"),
            "allow_external": ask(allow_external=True),  # consent is not the caller's
            "request.id": {"request": {"question": "q", "id": "../../etc/passwd"}},
            "council_type": ask(council_type="chaos"),
            "endpoints.0": ask(endpoints=["http://169.254.169.254/"]),
            "request.artifact.path": ask()
            | {"request": {"question": QUESTION, "artifact": {"path": "/etc/passwd"}}},
        }
        for field, body in cases.items():
            r = server.post(body)
            assert r.status_code == 422, (field, r.text)
            problem = r.json()
            assert problem["error"].startswith(field), (field, problem)
            assert field in [f["field"] for f in problem["fields"]]
        r = server.client.post(
            "/v1/councils", content=b"{not json", headers={"content-type": "application/json"}
        )
        assert r.status_code == 422 and r.json()["error"].startswith("body")
        assert not server.council_dir.exists() or not list(server.council_dir.glob("*.json"))


def test_a_used_run_id_is_409(tmp_path: Path) -> None:
    install_voices(tmp_path / "bin")
    with serving(tmp_path, "--yes") as server:
        assert server.post(ask("same")).status_code == 202
        picked = server.post({"request": {"question": QUESTION}})
        assert picked.status_code == 202
        assert picked.headers["location"] == f"/v1/councils/{picked.json()['id']}"
        again = server.post(ask("same"))
        assert again.status_code == 409 and "same" in again.json()["error"]
        server.wait_status("same", {"complete"})
        assert server.post(ask("same")).status_code == 409


def raw_get(port: int, target: str) -> tuple[int, bytes]:
    """A request line sent as written: no client normalises the path first."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        host = f"127.0.0.1:{port}"
        s.sendall(f"GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    status = int(data.split(b" ", 2)[1])
    return status, data


def test_run_ids_cannot_reach_outside_the_run_directory(tmp_path: Path) -> None:
    secret = tmp_path / ".rune" / "secret.json"
    secret.parent.mkdir(parents=True)
    secret.write_text('{"token": "do-not-serve"}')
    (tmp_path / ".rune" / "council").mkdir()
    # A symlinked run file pointing elsewhere is not served either.
    (tmp_path / ".rune" / "council" / "run-link.json").symlink_to(secret)
    with serving(tmp_path) as server:
        port = int(server.base.rsplit(":", 1)[1])
        for target in (
            "/v1/councils/../secret.json",
            "/v1/councils/..%2Fsecret",
            "/v1/councils/%2E%2E%2Fsecret",
            "/v1/councils/..",
            "/v1/councils/.hidden",
            "/v1/councils/link",
            "/v1/councils/..%2F..%2F..%2Fetc%2Fpasswd/events",
            "/runs/..%2Fsecret",
        ):
            status, data = raw_get(port, target)
            assert status in (400, 404), (target, status)
            assert b"do-not-serve" not in data and b"root:" not in data, target


def test_bodies_over_the_limit_are_refused(tmp_path: Path) -> None:
    with serving(tmp_path, "--max-body-bytes", "4096") as server:
        big = ask("big") | {"request": {"id": "big", "question": "x" * 10_000}}
        r = server.post(big)
        assert r.status_code == 413

        # No length up front: the server counts the chunks as they come.
        def chunks() -> object:
            for _ in range(20):
                yield b" " * 1024

        r = server.client.post(
            "/v1/councils", content=chunks(), headers={"content-type": "application/json"}
        )
        assert r.status_code == 413
        assert not (server.council_dir / "run-big.json").exists()


def test_artifact_paths_only_under_the_artifact_root(tmp_path: Path) -> None:
    install_voices(tmp_path / "bin")
    root = tmp_path / "docs"
    root.mkdir()
    (root / "plan.md").write_text("1. Split orders.\n2. No rollback step is defined.\n")
    (tmp_path / "outside.md").write_text("outside")
    (root / "escape.md").symlink_to(tmp_path / "outside.md")
    with serving(tmp_path, "--yes", "--artifact-root", str(root)) as server:

        def body(path: str, run_id: str) -> dict[str, object]:
            return {
                "request": {
                    "id": run_id,
                    "question": QUESTION,
                    "artifact": {"name": "plan.md", "path": path},
                }
            }

        for path in ("../outside.md", str(tmp_path / "outside.md"), "escape.md", "nope.md"):
            r = server.post(body(path, "a"))
            assert r.status_code == 422, path
            assert r.json()["fields"][0]["field"] == "request.artifact.path"
        assert server.post(body("plan.md", "inside")).status_code == 202
        doc = server.wait_status("inside", {"complete"})
        assert "No rollback step" in doc["artifact_text"]
        text = {
            "request": {
                "id": "text",
                "question": QUESTION,
                "artifact": {"name": "p", "text": "inline plan"},
            }
        }
        assert server.post(text).status_code == 202
        assert server.wait_status("text", {"complete"})["artifact_text"] == "inline plan"


def test_without_the_operators_consent_no_external_cli_is_used(tmp_path: Path) -> None:
    install_voices(tmp_path / "bin")
    with serving(tmp_path) as server:  # no --yes, nothing in the environment or config
        assert server.post(ask("noconsent")).status_code == 202
        doc = server.wait_status("noconsent", {"complete", "no_verdict", "failed"})
        assert "not granted" in (doc["runtime_report"]["consent"] or "")
        assert not any(
            v["source"] == "external-cli" and v["status"] == "complete" for v in doc["voices"]
        )


def test_a_non_loopback_bind_needs_a_token_and_checks_it(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "rune_council.cli",
            "council",
            "serve",
            "--host",
            "0.0.0.0",
            "--port",
            str(free_port()),
        ],
        cwd=tmp_path,
        env=base_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert "RUNE_COUNCIL_SERVE_TOKEN" in out.stderr and "0.0.0.0" in out.stderr
    token = "t0ken-" + "x" * 30
    env = base_env(tmp_path, RUNE_COUNCIL_SERVE_TOKEN=token)
    with serving(tmp_path, host="0.0.0.0", env=env, token=token) as server:
        anon = httpx.Client(base_url=server.base, timeout=10)
        assert anon.get("/healthz").status_code == 200
        for wrong in (None, "Bearer nope", f"Bearer {token}x", token):
            headers = {"Authorization": wrong} if wrong else {}
            assert anon.get("/v1/councils", headers=headers).status_code == 401
            assert anon.post("/v1/councils", json=ask(), headers=headers).status_code == 401
        assert server.client.get("/v1/councils").status_code == 200
        # The token buys a cookie that may read but never change anything.
        assert anon.post("/login", json={"token": token}).status_code == 204
        assert anon.get("/v1/councils").status_code == 200
        assert anon.post("/v1/councils", json=ask()).status_code == 401
        anon.close()


def test_cors_is_off_unless_configured(tmp_path: Path) -> None:
    with serving(tmp_path) as server:
        r = server.client.get("/v1/councils", headers={"Origin": "http://evil.example"})
        assert "access-control-allow-origin" not in r.headers
        pre = server.client.options(
            "/v1/councils",
            headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"},
        )
        assert "access-control-allow-origin" not in pre.headers
    with serving(tmp_path, "--cors-origin", "http://dash.local") as server:
        r = server.client.get("/v1/councils", headers={"Origin": "http://dash.local"})
        assert r.headers["access-control-allow-origin"] == "http://dash.local"
        r = server.client.get("/v1/councils", headers={"Origin": "http://evil.example"})
        assert "access-control-allow-origin" not in r.headers


def test_endpoint_keys_never_appear_in_a_response(tmp_path: Path) -> None:
    key = "sk-live-" + "k" * 40
    # The user's own config (a project's file may not send keys until trusted).
    config = tmp_path / ".config" / "rune-council" / "council.toml"
    config.parent.mkdir(parents=True)
    config.write_text(
        '[endpoints.local]\nbase_url = "http://127.0.0.1:9/v1"\nkey_env = "LOCAL_KEY"\n'
    )
    env = base_env(tmp_path, LOCAL_KEY=key)
    with serving(tmp_path, env=env) as server:
        runtimes = server.client.get("/v1/runtimes")
        assert runtimes.status_code == 200
        assert [e["name"] for e in runtimes.json()["endpoints"]] == ["local"]
        bodies = [runtimes.text]
        for path in ("/healthz", "/openapi.json", "/v1/councils", "/", "/docs"):
            bodies.append(server.client.get(path).text)
        assert not any(key in b for b in bodies)
        assert key not in server.log.read_text()
        # Naming the configured endpoint is accepted; naming an unknown one is not.
        assert server.post(ask(endpoints=["nope"])).status_code == 422


def test_queue_then_429_with_retry_after(tmp_path: Path) -> None:
    install_voices(tmp_path / "bin", sleeps=(3, 3, 3))
    with serving(tmp_path, "--yes", "--max-concurrent", "1", "--max-queued", "1") as server:
        assert server.post(ask("one")).status_code == 202
        assert server.post(ask("two")).status_code == 202
        busy = server.post(ask("three"))
        assert busy.status_code == 429 and int(busy.headers["retry-after"]) > 0
        assert server.client.get("/v1/councils/two").json()["status"] == "queued"
        server.wait_status("one", {"running"})
        health = server.client.get("/healthz").json()
        assert (health["running"], health["queued"]) == (1, 1)
        listed = server.client.get("/v1/councils", params={"status": "queued"}).json()
        assert [row["id"] for row in listed["items"]] == ["two"]
        jsonschema.validate(server.run_file("two"), SCHEMA)
        # Cancelling the queued one frees its place at once.
        r = server.client.post("/v1/councils/two/cancel")
        assert r.status_code == 200 and r.json()["status"] == "cancelled"
        assert server.run_file("two")["status"] == "cancelled"
        assert server.post(ask("three")).status_code == 202
        server.wait_status("three", {"complete"}, timeout=90)
        assert server.run_file("one")["status"] == "complete"


def test_cancel_a_running_council_keeps_finished_voices(tmp_path: Path) -> None:
    install_voices(tmp_path / "bin", sleeps=(0.2, 60, 60))
    with serving(tmp_path, "--yes") as server:
        assert server.post(ask("stopme")).status_code == 202
        wait_voice(server, "stopme", "v1", "complete")
        r = server.client.post("/v1/councils/stopme/cancel")
        assert r.status_code == 200 and r.json()["status"] == "cancelled"
        doc = server.run_file("stopme")
        assert doc["status"] == "cancelled"
        assert {v["id"]: v["status"] for v in doc["voices"]} == {
            "v1": "complete",
            "v2": "dropped",
            "v3": "dropped",
        }
        again = server.client.post("/v1/councils/stopme/cancel")
        assert again.status_code == 409 and "cancelled" in again.json()["error"]
        assert server.client.post("/v1/councils/ghost/cancel").status_code == 404


def wait_voice(server: object, run_id: str, voice: str, status: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            doc = server.run_file(run_id)  # type: ignore[attr-defined]
        except (FileNotFoundError, json.JSONDecodeError):
            doc = {"voices": []}
        if any(v["id"] == voice and v["status"] == status for v in doc["voices"]):
            return
        time.sleep(0.05)
    raise AssertionError(f"{voice} of {run_id} never became {status}")


def test_sigterm_cancels_running_councils_cleanly(tmp_path: Path) -> None:
    install_voices(tmp_path / "bin", sleeps=(0.2, 120, 120))
    server = start(tmp_path, "--yes", "--max-concurrent", "1")
    try:
        assert server.post(ask("busy")).status_code == 202
        assert server.post(ask("waiting")).status_code == 202
        wait_voice(server, "busy", "v1", "complete")
        children = psutil.Process(server.proc.pid).children(recursive=True)
        assert children, "the slow voices run as processes"
        # A client following the run must not hold the shutdown up.
        follower = httpx.Client(base_url=server.base, timeout=30)
        started = time.monotonic()
        with follower.stream("GET", "/v1/councils/busy/events") as stream:
            server.proc.send_signal(signal.SIGTERM)
            tail = b"".join(stream.iter_raw())
        server.proc.wait(30)
        assert time.monotonic() - started < 60  # the voices would sleep 120 s
        assert b'"status":"cancelled"' in tail
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
    busy = server.run_file("busy")
    assert busy["status"] == "cancelled"
    assert {v["id"]: v["status"] for v in busy["voices"]}["v1"] == "complete"
    assert server.run_file("waiting")["status"] == "cancelled"
    jsonschema.validate(busy, SCHEMA)
    time.sleep(0.5)
    assert not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]


def cli_council(home: Path, run_id: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rune_council.cli",
            "council",
            QUESTION,
            "--id",
            run_id,
            "--rune-dir",
            str(home / ".rune"),
            "--yes",
            "--json",
        ],
        cwd=home,
        env=base_env(home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def test_a_council_started_from_the_cli_streams_too(tmp_path: Path) -> None:
    install_voices(tmp_path / "bin", sleeps=(0.5, 1.0, 1.5))
    with serving(tmp_path) as server:
        proc = cli_council(tmp_path, "fromcli")
        try:
            deadline = time.monotonic() + 30
            while not (server.council_dir / "run-fromcli.json").exists():
                assert time.monotonic() < deadline
                time.sleep(0.05)
            frames = sse(server.client, "fromcli")
        finally:
            proc.wait(60)
        assert frames[-1][0] == "end" and frames[-1][2]["status"] == "complete"
        seqs = [int(f[1]) for f in frames if f[0] == "transition"]
        assert seqs == [e["seq"] for e in server.run_file("fromcli")["events"]]
        listed = server.client.get("/v1/councils", params={"stamp": "MULTI_FAMILY"}).json()
        assert "fromcli" in [row["id"] for row in listed["items"]]
        # Another process's council is not this server's to cancel.
        assert server.client.post("/v1/councils/fromcli/cancel").status_code == 409


def test_the_stream_ends_abandoned_when_the_writer_dies(tmp_path: Path) -> None:
    install_voices(tmp_path / "bin", sleeps=(60, 60, 60))
    with serving(tmp_path) as server:
        proc = cli_council(tmp_path, "orphan")
        voices: list[psutil.Process] = []
        try:
            wait_voice(server, "orphan", "v1", "running")
            voices = psutil.Process(proc.pid).children(recursive=True)
            proc.kill()
            proc.wait(10)
            frames = sse(server.client, "orphan", timeout=30)
        finally:
            for p in [*voices]:
                with contextlib.suppress(psutil.Error):
                    p.kill()
            if proc.poll() is None:
                proc.kill()
        assert frames[-1][0] == "end" and frames[-1][2]["status"] == "abandoned"
        listed = server.client.get("/v1/councils", params={"status": "abandoned"}).json()
        assert [row["id"] for row in listed["items"]] == ["orphan"]


def test_list_filters_and_pages(tmp_path: Path) -> None:
    install_voices(tmp_path / "bin")
    with serving(tmp_path, "--yes") as server:
        for i in range(5):
            assert server.post(ask(f"r{i}")).status_code == 202
        for i in range(5):
            server.wait_status(f"r{i}", {"complete"})
        first = server.client.get("/v1/councils", params={"limit": 2}).json()
        assert first["total"] == 5 and len(first["items"]) == 2
        second = server.client.get(first["next"]).json()
        third = server.client.get(second["next"]).json()
        assert third["next"] is None
        ids = [r["id"] for page in (first, second, third) for r in page["items"]]
        assert sorted(ids) == [f"r{i}" for i in range(5)]
        none = server.client.get("/v1/councils", params={"stamp": "NO_DECORRELATION"}).json()
        assert none["items"] == [] and none["total"] == 0
        assert server.client.get("/v1/councils", params={"status": "nonsense"}).status_code == 400
        assert server.client.get("/v1/councils", params={"limit": "0"}).status_code == 400


def test_openapi_and_docs_come_from_the_package(tmp_path: Path) -> None:
    with serving(tmp_path) as server:
        spec = server.client.get("/openapi.json").json()
        assert spec["openapi"].startswith("3.")
        assert {
            "/v1/councils",
            "/v1/councils/{run_id}",
            "/v1/councils/{run_id}/events",
            "/v1/councils/{run_id}/cancel",
            "/v1/runtimes",
            "/healthz",
        } <= set(spec["paths"])
        schemas = spec["components"]["schemas"]
        assert {"CouncilResult", "PerspectiveRequest", "CouncilAsk", "Voice"} <= set(schemas)
        assert "queued" in schemas["CouncilResult"]["properties"]["status"]["enum"]
        docs = server.client.get("/docs")
        assert docs.status_code == 200 and "/assets/docs.js" in docs.text
        assets = Path(__file__).resolve().parents[1] / "rune_council" / "serve" / "assets"
        for asset in assets.iterdir():
            text = asset.read_text()
            assert "http://" not in text and "https://" not in text, asset.name
            assert server.client.get(f"/assets/{asset.name}").status_code == 200
        page = server.client.get("/")
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert server.client.get("/v1/runtimes").json()["detected"]
