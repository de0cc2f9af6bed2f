"""An endpoint is not the user: what it replies is bounded, and a repository cannot add one.

Every attack runs as an outsider would mount it: a real server on 127.0.0.1 sending the bytes
it likes (compression bombs, stacked ``Content-Encoding``, escape sequences in model ids),
and ``rune`` as a real process whose peak memory is read from the kernel (``wait4``).
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from rune_council.runtimes.content_coding import BodyDecoder, BodyUnreadable
from tests.helpers import answer, claim

Q = "Should we shard the orders table?"
MODEL = "meta/llama-3.3-70b-instruct"
GOOD = answer(Q, "NO", [claim("The plan has no rollback step")])
# A plain council stays far below this; each bomb below expands to a gigabyte or more.
PEAK_RSS_BOUND = 400 * 1024 * 1024
TIMEOUT_S = 20.0
# Start-up, detection and writing the run file, on a loaded machine.
MARGIN_S = 30.0
# Old behaviour took the whole machine; the child may not use more address space than this.
ADDRESS_SPACE_LIMIT = 3 * 1024 * 1024 * 1024


# --------------------------------------------------------------------------- the server


@dataclass
class Reply:
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    status: int = 200
    content_type: str = "application/json"


def completion(text: str) -> bytes:
    choice = {"index": 0, "message": {"role": "assistant", "content": text}}
    return json.dumps({"object": "chat.completion", "choices": [choice]}).encode()


def model_list(*ids: str) -> bytes:
    return json.dumps({"object": "list", "data": [{"id": i} for i in ids]}).encode()


@dataclass
class HostileServer:
    """``GET /v1/models`` and ``POST /v1/chat/completions`` answer with whatever bytes and
    headers the test planted; every request is counted."""

    models: Reply = field(default_factory=lambda: Reply(model_list(MODEL)))
    chat: Reply = field(default_factory=lambda: Reply(completion(GOOD)))
    requests: list[str] = field(default_factory=list)
    _httpd: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> HostileServer:
        app = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _reply(self, reply: Reply) -> None:
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Content-Length", str(len(reply.body)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                try:
                    self.wfile.write(reply.body)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

            def do_GET(self) -> None:
                app.requests.append(f"GET {self.path}")
                self._reply(app.models)

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                app.requests.append(f"POST {self.path}")
                self._reply(app.chat)

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        httpd.daemon_threads = True
        self._httpd = httpd
        threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._httpd is not None
        self._httpd.shutdown()
        self._httpd.server_close()


# --------------------------------------------------------------------------- bombs

GIGABYTE = 1 << 30


def _compressed_zeros(size: int, wbits: int) -> bytes:
    """``size`` zero bytes compressed (31: gzip, 15: zlib), without holding them."""
    block = bytes(1 << 20)
    c = zlib.compressobj(9, zlib.DEFLATED, wbits)
    parts = [c.compress(block) for _ in range(size // len(block))]
    return b"".join([*parts, c.flush()])


@pytest.fixture(scope="module")
def gzip_gigabyte() -> bytes:
    return _compressed_zeros(GIGABYTE, 31)


@pytest.fixture(scope="module")
def zlib_gigabyte() -> bytes:
    return _compressed_zeros(GIGABYTE, 15)


# --------------------------------------------------------------------------- running rune


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    peak_rss: int  # bytes


# rune is started by a small launcher that forks it, sets the limit and reports the peak RSS
# wait4 gives for it. Measuring a direct child of this test run would not do: Linux keeps a
# process's peak RSS across exec, and a child forked or vforked from this process starts from
# this whole test run's memory.
_LAUNCH = """
import os, resource, signal, sys
limit, report = int(sys.argv[1]), sys.argv[2]
pid = os.fork()
if pid == 0:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    os.execv(sys.executable, [sys.executable, *sys.argv[3:]])
_, status, usage = os.wait4(pid, 0)
with open(report, "w") as f:
    f.write(str(usage.ru_maxrss))
code = os.waitstatus_to_exitcode(status)
if code < 0:
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
os._exit(code)
"""


def environment(tmp: Path, **extra: str) -> dict[str, str]:
    (tmp / "bin").mkdir(exist_ok=True)
    return {
        "PATH": f"{tmp / 'bin'}:/usr/bin:/bin",
        "HOME": str(tmp),
        "LANG": "C.UTF-8",
        "RUNE_COUNCIL_LOGIN_SHELL": "0",
        "RUNE_COUNCIL_ALLOW_EXTERNAL": "1",
        **extra,
    }


def rune(tmp: Path, *args: str, wall_s: float = 120.0, **extra: str) -> Ran:
    """``rune ARGS`` as a real process; its own peak RSS comes from ``wait4``, so nothing
    else this test run started is counted."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.monotonic()
        report = tmp / f"peak-{time.monotonic_ns()}"
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _LAUNCH,
                str(ADDRESS_SPACE_LIMIT),
                str(report),
                "-m",
                "rune_council.cli",
                *args,
            ],
            start_new_session=True,
            cwd=tmp,
            env=environment(tmp, **extra),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
        )
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - started > wall_s:
                os.killpg(proc.pid, signal.SIGKILL)
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.02)
        proc.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.monotonic() - started
        out.seek(0)
        err.seek(0)
        return Ran(
            proc.returncode,
            out.read().decode("utf-8", "replace"),
            err.read().decode("utf-8", "replace"),
            seconds,
            # kilobytes on Linux; a launcher killed at the wall bound reports none
            int(report.read_text()) * 1024 if report.exists() else usage.ru_maxrss * 1024,
        )


def council(tmp: Path, server: HostileServer, run_id: str) -> tuple[Ran, dict[str, Any]]:
    ran = rune(
        tmp,
        "council",
        "--endpoint",
        server.base_url,
        "--timeout",
        str(TIMEOUT_S),
        "--n",
        "2",
        "--id",
        run_id,
        "--json",
        Q,
        wall_s=TIMEOUT_S + MARGIN_S + 60,
    )
    assert ran.stdout, ran.stderr
    return ran, json.loads(ran.stdout)


def bounded(ran: Ran) -> None:
    mb = ran.peak_rss / 1e6
    assert ran.peak_rss < PEAK_RSS_BOUND, f"peak RSS {mb:.0f} MB"
    assert ran.seconds < TIMEOUT_S + MARGIN_S, f"took {ran.seconds:.1f} s"


def endpoint_voices(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [v for v in doc["voices"] if v["source"] == "external-http"]


# --------------------------------------------------------------------------- decoders


BombCase = Callable[[bytes, bytes], Reply]


def _stacked_gzip(gz: bytes, _z: bytes) -> Reply:
    # 1.8 KB on the wire: gzip inside gzip, both announced.
    return Reply(gzip.compress(gz), {"Content-Encoding": "gzip, gzip"})


def _stacked_deflate(_gz: bytes, z: bytes) -> Reply:
    return Reply(zlib.compress(z, 9), {"Content-Encoding": "deflate, deflate"})


def _gzip_header_lines(gz: bytes, _z: bytes) -> Reply:
    # The same stack announced as two header lines.
    return Reply(gzip.compress(gz), {"Content-Encoding": "gzip", "content-encoding": "gzip"})


def _hundred_layers(gz: bytes, _z: bytes) -> Reply:
    body = gz
    for _ in range(99):
        body = gzip.compress(body, 9)
    return Reply(body, {"Content-Encoding": ", ".join(["gzip"] * 100)})


def _streamed_stack(gz: bytes, _z: bytes) -> Reply:
    # A server-sent-event reply is read chunk by chunk: the same stack, streamed.
    return Reply(
        gzip.compress(gz), {"Content-Encoding": "gzip, gzip"}, content_type="text/event-stream"
    )


def _error_stack(gz: bytes, _z: bytes) -> Reply:
    # An error reply is read for its message only: the same stack on a 500.
    return Reply(gzip.compress(gz), {"Content-Encoding": "gzip, gzip"}, status=500)


BOMBS: dict[str, tuple[BombCase, str]] = {
    "error-status-gzip-in-gzip": (_error_stack, "HTTP 500"),
    "gzip-in-gzip": (_stacked_gzip, "exceeded 1000000 bytes"),
    "deflate-in-deflate": (_stacked_deflate, "exceeded 1000000 bytes"),
    "gzip-twice-by-header-lines": (_gzip_header_lines, "exceeded 1000000 bytes"),
    "gzip-x100": (_hundred_layers, "stacks 100 content encodings"),
    "streamed-gzip-in-gzip": (_streamed_stack, "exceeded 1000000 bytes"),
}


@pytest.mark.parametrize("case", sorted(BOMBS))
def test_a_compression_bomb_drops_the_voice_within_memory_and_time(
    tmp_path: Path, case: str, gzip_gigabyte: bytes, zlib_gigabyte: bytes
) -> None:
    build, reason = BOMBS[case]
    reply = build(gzip_gigabyte, zlib_gigabyte)
    assert len(reply.body) < 64_000  # a small reply ...
    with HostileServer(chat=reply) as server:
        ran, doc = council(tmp_path, server, f"bomb-{case}")
    bounded(ran)  # ... that must not become a large process
    voices = endpoint_voices(doc)
    assert voices, doc["notes"]
    for voice in voices:
        assert voice["status"] == "dropped"
        assert reason in voice["drop_reason"], voice["drop_reason"]
        assert voice["attempts"][0]["outcome"] in ("too_large", "malformed", "http_status")


def test_a_brotli_reply_is_refused_not_decoded_by_whatever_is_installed(tmp_path: Path) -> None:
    """Whether httpx decodes br depends on which packages are installed, and not every
    brotli decoder takes an output bound: the client does not ask for it and refuses it."""
    reply = Reply(completion(GOOD), {"Content-Encoding": "br"})
    with HostileServer(chat=reply) as server:
        ran, doc = council(tmp_path, server, "brotli")
    bounded(ran)
    voices = endpoint_voices(doc)
    assert voices, doc["notes"]
    for voice in voices:
        assert voice["status"] == "dropped"
        assert "encoded as 'br', which this client did not ask for" in voice["drop_reason"]


def test_an_honest_compressed_reply_still_answers(tmp_path: Path) -> None:
    reply = Reply(gzip.compress(completion(GOOD)), {"Content-Encoding": "gzip"})
    with HostileServer(chat=reply) as server:
        ran, doc = council(tmp_path, server, "honest")
    voices = endpoint_voices(doc)
    assert voices and all(v["status"] == "complete" for v in voices), voices
    assert ran.peak_rss < PEAK_RSS_BOUND


def test_a_bomb_in_the_model_list_leaves_the_endpoint_unseated_within_bounds(
    tmp_path: Path, gzip_gigabyte: bytes
) -> None:
    bomb = Reply(gzip.compress(gzip_gigabyte), {"Content-Encoding": "gzip, gzip"})
    with HostileServer(models=bomb) as server:
        ran = rune(tmp_path, "council", "endpoints", "--endpoint", server.base_url)
        assert server.requests == ["GET /v1/models"]
    bounded(ran)
    assert ran.returncode == 0, ran.stderr
    assert "model discovery failed (GET /models: response exceeded 8000000 bytes" in ran.stdout


def _raw_deflate(data: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return c.compress(data) + c.flush()


HONEST: dict[str, tuple[str, Callable[[bytes], bytes]]] = {
    "gzip": ("gzip", gzip.compress),
    "x-gzip": ("x-gzip", gzip.compress),
    "gzip in two members": ("gzip", lambda d: gzip.compress(d[:999]) + gzip.compress(d[999:])),
    "zlib deflate": ("deflate", zlib.compress),
    "raw deflate (as some servers send it)": ("deflate", _raw_deflate),
    "deflate then gzip": ("deflate, gzip", lambda d: gzip.compress(zlib.compress(d))),
    "identity": ("identity", lambda d: d),
}


@pytest.mark.parametrize("case", sorted(HONEST))
@pytest.mark.parametrize("split", [1, 7, 1000, 1 << 20])
def test_an_honest_encoded_body_decodes_the_same_however_it_is_split(case: str, split: int) -> None:
    header, encode = HONEST[case]
    body = completion(GOOD) * 40 + os.urandom(3000)  # compressible text and noise
    wire = encode(body)
    decoder = BodyDecoder([header], cap=len(body))
    out = b"".join(decoder.feed(wire[i : i + split]) for i in range(0, len(wire), split))
    decoder.finish()
    assert out == body


def test_a_compressed_body_cut_short_is_unreadable_not_half_an_answer() -> None:
    wire = gzip.compress(completion(GOOD))
    decoder = BodyDecoder(["gzip"], cap=1_000_000)
    decoder.feed(wire[:-6])
    with pytest.raises(BodyUnreadable, match="ends before its end"):
        decoder.finish()


# --------------------------------------------------------------------------- trust


def test_an_untrusted_repository_cannot_seat_a_keyless_endpoint_until_trusted(
    tmp_path: Path,
) -> None:
    """A seat is sent the question and the artifact and votes: a cloned repository's
    council.toml naming a keyless endpoint gets no request to it until the user trusts it."""
    from tests.http_server import OpenAIServer, answering

    with OpenAIServer(models=[MODEL], behaviours={MODEL: answering(GOOD)}) as server:
        toml = tmp_path / ".rune" / "council.toml"
        toml.parent.mkdir()
        toml.write_text(f'[endpoints.mirror]\nbase_url = "{server.base_url}"\n')
        how = f"rune council trust {toml}"

        run = rune(tmp_path, "council", "--n", "2", "--id", "u1", "--json", Q)
        doc = json.loads(run.stdout)
        assert server.requests() == []  # not the model list, not the question
        assert not endpoint_voices(doc)
        [note] = [n for n in doc["notes"] if "is not trusted" in n]
        assert "[endpoints.mirror]" in note and "seat endpoints as voices" in note
        assert how in note

        listing = rune(tmp_path, "council", "endpoints")
        assert listing.returncode == 0, listing.stderr
        assert "[endpoints.mirror]" in listing.stderr and how in listing.stderr
        assert listing.stdout.startswith("no endpoints in force: mirror is defined only by")
        named = rune(tmp_path, "council", "endpoints", "--endpoint", "mirror")
        assert named.returncode == 2
        assert "seats no voice and is sent nothing" in named.stderr and how in named.stderr
        doctor = rune(tmp_path, "council", "doctor")
        assert "not trusted: left out [endpoints.mirror]" in doctor.stdout
        assert server.requests() == []

        assert rune(tmp_path, "council", "trust").returncode == 0
        trusted = rune(tmp_path, "council", "--n", "2", "--id", "t1", "--json", Q)
        seated = endpoint_voices(json.loads(trusted.stdout))
        assert seated and all(v["status"] == "complete" for v in seated), trusted.stderr
        assert server.chat_models() != []
