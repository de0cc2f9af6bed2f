"""A real ``rune council serve`` process on a loopback port, with fake CLIs as its voices."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from rune_council.runs import load
from tests.fakes.bin import install_fake, path_with
from tests.helpers import QUESTION, ROLLBACK, UNDO, answer, claim

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def install_voices(
    bin_dir: Path,
    *,
    sleeps: tuple[float, float, float] = (0, 0, 0),
    gemini_text: str | None = None,
    **settings: Any,
) -> None:
    """claude and codex agree on the missing rollback; gemini says something else."""
    install_fake(
        bin_dir, "claude", answer=answer(QUESTION, "NO", [ROLLBACK]), sleep_s=sleeps[0], **settings
    )
    install_fake(
        bin_dir, "codex", answer=answer(QUESTION, "NO", [UNDO]), sleep_s=sleeps[1], **settings
    )
    install_fake(
        bin_dir,
        "gemini",
        answer=gemini_text or answer(QUESTION, "YES", [claim("Fine as is")]),
        sleep_s=sleeps[2],
        **settings,
    )


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    base: str
    home: Path
    log: Path
    client: httpx.Client = field(repr=False)
    env: dict[str, str] = field(default_factory=dict)

    @property
    def council_dir(self) -> Path:
        return self.home / ".rune" / "council"

    def run_file(self, run_id: str) -> dict[str, Any]:
        # As a reader gets it: the artifact kept beside the run file (contract 2.8) put back.
        path = self.council_dir / f"run-{run_id}.json"
        if not path.exists():
            raise FileNotFoundError(path)  # what a caller waiting for the file expects
        return load(path).model_dump(mode="json")

    def post(self, body: dict[str, Any], **kwargs: Any) -> httpx.Response:
        return self.client.post("/v1/councils", json=body, **kwargs)

    def wait_status(self, run_id: str, wanted: set[str], timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        doc: dict[str, Any] = {}
        while time.monotonic() < deadline:
            r = self.client.get(f"/v1/councils/{run_id}")
            if r.status_code == 200:
                doc = r.json()
                if doc["status"] in wanted:
                    return doc
            time.sleep(0.1)
        raise AssertionError(f"{run_id} never reached {wanted}: {doc.get('status')}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
                raise AssertionError("server did not stop: " + self.log.read_text()) from None
        self.client.close()
        return self.proc.returncode


def base_env(home: Path, **extra: str) -> dict[str, str]:
    env = {
        "PATH": path_with(home / "bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(ROOT),
    }
    env.update(extra)
    return env


def start(
    home: Path,
    *args: str,
    env: dict[str, str] | None = None,
    host: str = "127.0.0.1",
    token: str | None = None,
    port: int | None = None,
) -> Server:
    port = port or free_port()
    log = home / "server.log"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rune_council.cli",
            "council",
            "serve",
            "--host",
            host,
            "--port",
            str(port),
            "--rune-dir",
            str(home / ".rune"),
            *args,
        ],
        cwd=home,
        env=env or base_env(home),
        stdin=subprocess.DEVNULL,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    client = httpx.Client(base_url=base, timeout=30, headers=headers)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited {proc.returncode}: {log.read_text()}")
        with contextlib.suppress(httpx.TransportError):
            if client.get("/healthz").status_code == 200:
                return Server(proc, base, home, log, client, env or {})
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("server did not come up: " + log.read_text())


@contextlib.contextmanager
def serving(home: Path, *args: str, **kwargs: Any) -> Iterator[Server]:
    server = start(home, *args, **kwargs)
    try:
        yield server
    finally:
        if server.proc.poll() is None:
            with contextlib.suppress(AssertionError):
                server.stop()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.proc.pid, signal.SIGKILL)


def sse(
    client: httpx.Client,
    run_id: str,
    last_id: int | None = None,
    limit: int | None = None,
    timeout: float = 60,
) -> list[tuple[str, str | None, Any]]:
    """(event, id, data) frames until the stream ends, or after ``limit`` transitions."""
    headers = {"Last-Event-ID": str(last_id)} if last_id is not None else {}
    frames: list[tuple[str, str | None, Any]] = []
    transitions = 0
    with client.stream(
        "GET", f"/v1/councils/{run_id}/events", headers=headers, timeout=timeout
    ) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        event, ident, data = "message", None, None
        for line in response.iter_lines():
            if line.startswith(":"):
                continue
            if not line:
                if data is not None:
                    frames.append((event, ident, json.loads(data)))
                    if event == "transition":
                        transitions += 1
                        if limit is not None and transitions >= limit:
                            return frames
                event, ident, data = "message", None, None
                continue
            key, _, value = line.partition(": ")
            if key == "event":
                event = value
            elif key == "id":
                ident = value
            elif key == "data":
                data = value
    return frames
