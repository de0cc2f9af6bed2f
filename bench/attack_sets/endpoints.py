"""Endpoint replies and printing: a hostile OpenAI-compatible server on 127.0.0.1.

The servers are the test suite's: ``HostileServer`` (tests/test_security_endpoints.py) answers
with whatever bytes and headers are planted, ``OpenAIServer`` (tests/http_server.py) lists
the models it is given. The bombs are the suite's too: a gigabyte of zeros compressed, then
compressed again (about 1.8 KB on the wire), announced as stacked ``Content-Encoding``.

Held: the attack's own criterion (the voice dropped with the reason the decoder gives, no
raw control byte printed, no request sent, no key shown), the process under 400 MB peak
RSS and done within ``--timeout`` + 30 s where a bomb is involved.
"""

from __future__ import annotations

import base64
import functools
import json
from typing import Any

from tests.http_server import OpenAIServer, answering
from tests.test_security_endpoints import (
    MARGIN_S,
    MODEL,
    PEAK_RSS_BOUND,
    TIMEOUT_S,
    BombCase,
    HostileServer,
    Reply,
    _compressed_zeros,
    _error_stack,
    _hundred_layers,
    _stacked_deflate,
    _stacked_gzip,
    _streamed_stack,
    completion,
    environment,
)
from tests.test_security_model_cache import PLANTED as PLANTED_MODELS
from tests.test_security_model_cache import _plant as _plant_model_list
from tests.test_security_model_cache import _project as _cache_project
from tests.test_security_model_ids import KEY
from tests.test_security_printing import C1_CSI, HOSTILE_IDS, RAW_CONTROL

from .kit import GOOD, MB, OFFLINE, Q, Ran, Row, World, attack, expect

SECTION = "endpoint replies and printing"
GIGABYTE = 1 << 30
BIDI = "\u202e"


@functools.cache
def _gigabyte(wbits: int) -> bytes:
    """A gigabyte of zeros compressed (31: gzip, 15: zlib), made once for the whole bench."""
    return bytes(_compressed_zeros(GIGABYTE, wbits))


def _env(w: World, **extra: str) -> dict[str, str]:
    return {**environment(w.tmp), **OFFLINE, **extra}


def _council(w: World, url: str, run_id: str, *extra: str) -> tuple[Ran, dict[str, Any]]:
    ran = w.rune(
        "--endpoint",
        url,
        "--timeout",
        str(TIMEOUT_S),
        "--n",
        "2",
        "--id",
        run_id,
        "--json",
        *extra,
        Q,
        env=_env(w),
        ok=(0, 1),
        timeout=TIMEOUT_S + MARGIN_S + 60,
    )
    try:
        doc: dict[str, Any] = json.loads(ran.stdout)
    except ValueError:
        doc = {}
    return ran, doc


def _bounded(failures: list[str], ran: Ran) -> None:
    expect(
        failures,
        ran.peak_mb * MB < PEAK_RSS_BOUND,
        f"peak RSS {ran.peak_mb:.0f} MB, over {PEAK_RSS_BOUND // MB} MB",
    )
    expect(
        failures,
        ran.seconds < TIMEOUT_S + MARGIN_S,
        f"took {ran.seconds:.1f} s, past --timeout {TIMEOUT_S:.0f} + {MARGIN_S:.0f} s",
    )


def _dropped(failures: list[str], doc: dict[str, Any], reason: str) -> None:
    voices = [v for v in doc.get("voices", []) if v.get("source") == "external-http"]
    if not expect(failures, bool(voices), "no endpoint voice was seated"):
        return
    for voice in voices:
        expect(
            failures,
            voice["status"] == "dropped" and reason in (voice.get("drop_reason") or ""),
            f"{voice['id']} {voice['status']}: {str(voice.get('drop_reason'))[:120]!r}",
        )


def _bomb(build: BombCase, reason: str) -> Any:
    def run(w: World) -> Row:
        reply = build(_gigabyte(31), _gigabyte(15))
        failures: list[str] = []
        with HostileServer(chat=reply) as server:
            ran, doc = _council(w, server.base_url, "bomb")
        _bounded(failures, ran)
        _dropped(failures, doc, reason)
        why = f"voices dropped with {reason!r}, {ran.peak_mb:.0f} MB, {ran.seconds:.0f} s"
        return w.row(failures, why, note=f"reply {len(reply.body):,} bytes")

    return run


for _name, _build, _reason in (
    ("stacked gzip: gzip(gzip(1 GiB)), 'gzip, gzip'", _stacked_gzip, "exceeded"),
    ("stacked deflate: zlib(zlib(1 GiB)), 'deflate, deflate'", _stacked_deflate, "exceeded"),
    ("gzip x100: 100 nested layers announced", _hundred_layers, "stacks 100 content encodings"),
    ("stacked gzip as text/event-stream", _streamed_stack, "exceeded"),
    ("stacked gzip on an HTTP 500", _error_stack, "HTTP 500"),
):
    attack(_name, SECTION)(_bomb(_build, _reason))


@attack("stacked gzip on GET /v1/models (endpoints --endpoint)", SECTION)
def _(w: World) -> Row:
    bomb = Reply(_stacked_gzip(_gigabyte(31), b"").body, {"Content-Encoding": "gzip, gzip"})
    failures: list[str] = []
    with HostileServer(models=bomb) as server:
        ran = w.rune("endpoints", "--endpoint", server.base_url, env=_env(w), timeout=120)
    _bounded(failures, ran)
    expect(
        failures,
        "model discovery failed" in ran.stdout and "exceeded" in ran.stdout,
        f"no 'model discovery failed ... exceeded': {ran.stdout[:160]!r}",
    )
    return w.row(failures, f"exit 0, 'model discovery failed ... exceeded', {ran.peak_mb:.0f} MB")


@attack("Content-Encoding: br on a valid completion", SECTION)
def _(w: World) -> Row:
    reply = Reply(completion(GOOD), {"Content-Encoding": "br"})
    failures: list[str] = []
    with HostileServer(chat=reply) as server:
        ran, doc = _council(w, server.base_url, "brotli")
    _bounded(failures, ran)
    _dropped(failures, doc, "encoded as 'br'")
    return w.row(failures, "voices dropped: encoded as 'br', which this client did not ask for")


@attack("untrusted repository names a keyless endpoint", SECTION)
def _(w: World) -> Row:
    failures: list[str] = []
    with OpenAIServer(models=[MODEL], behaviours={MODEL: answering(GOOD)}) as server:
        toml = w.tmp / ".rune" / "council.toml"
        toml.parent.mkdir()
        toml.write_text(f'[endpoints.x]\nbase_url = "{server.base_url}"\n')
        how = "rune council trust"
        ran = w.rune("--n", "2", "--id", "u1", "--json", Q, env=_env(w), ok=(0, 1))
        try:
            notes = json.loads(ran.stdout).get("notes", [])
        except ValueError:
            notes = []
        named = [n for n in notes if "[endpoints.x]" in n and how in n]
        expect(failures, bool(named), "no note names [endpoints.x] and `rune council trust`")
        listing = w.rune("endpoints", env=_env(w))
        expect(failures, "[endpoints.x]" in listing.text, "endpoints does not name [endpoints.x]")
        seen = len(server.requests())
    expect(failures, seen == 0, f"the endpoint got {seen} request(s)")
    return w.row(failures, "0 requests reached it; a note names [endpoints.x] and the trust fix")


def _inert(failures: list[str], ran: Ran) -> None:
    for where, data in (("stdout", ran.out), ("stderr", ran.err)):
        found = RAW_CONTROL.findall(data)
        expect(failures, not found, f"{ran.label} {where} carries raw {found[:3]!r}")


@attack("escape sequences in model ids (OSC title, CSI, C1)", SECTION)
def _(w: World) -> Row:
    good = answering(GOOD)
    failures: list[str] = []
    with OpenAIServer(models=list(HOSTILE_IDS), behaviours={m: good for m in HOSTILE_IDS}) as srv:
        user = w.tmp / ".config" / "rune-council"
        user.mkdir(parents=True)
        (user / "council.toml").write_text(f'[endpoints.lab]\nbase_url = "{srv.base_url}"\n')
        env = _env(w)
        runs = [
            w.rune("endpoints", "--refresh-models", env=env),
            w.rune("endpoints", "--json", env=env),
            w.rune("doctor", env=env, ok=(0, 1)),
        ]
    for ran in runs:
        _inert(failures, ran)
    shown = "evil/llama-3.3-70b-instruct" in runs[0].stdout
    expect(failures, shown, "the model ids are not shown at all")
    return w.row(failures, "ids listed without ESC, BEL, C1 or bidi bytes in any output")


@attack("raw C1 CSI and U+202E in an answer, --json", SECTION)
def _(w: World) -> Row:
    text = f"{C1_CSI}{BIDI}Read this first.\n" + GOOD
    failures: list[str] = []
    with OpenAIServer(models=[MODEL], behaviours={MODEL: answering(text)}) as server:
        ran, doc = _council(w, server.base_url, "c1")
    _inert(failures, ran)
    expect(failures, bool(doc.get("voices")), "--json printed no result")
    return w.row(failures, "stdout is JSON with those characters escaped")


@attack("model id carries the endpoint key (plain, base64)", SECTION)
def _(w: World) -> Row:
    honest = MODEL
    leaky = [f"leak/{KEY}", "leak/" + base64.b64encode(KEY.encode()).decode()]
    forms = [KEY, KEY[8:20], base64.b64encode(KEY.encode()).decode()[:16]]
    w.secrets += forms
    w.file_roots = [w.tmp]
    failures: list[str] = []
    models = [honest, *leaky]
    with OpenAIServer(models=models, behaviours={m: answering(GOOD) for m in models}) as srv:
        user = w.tmp / ".config" / "rune-council"
        user.mkdir(parents=True)
        config = f'[endpoints.lab]\nbase_url = "{srv.base_url}"\nkey_env = "LAB_KEY"\n'
        (user / "council.toml").write_text(config)
        ran = w.rune("endpoints", "--refresh-models", env=_env(w, LAB_KEY=KEY))
        calls = srv.models_calls
    expect(failures, calls == 1, f"GET /v1/models called {calls} times")
    expect(failures, honest in ran.stdout, "the honest model is not listed")
    return w.row(failures, "the key, plain or base64, in no output and no file under HOME")


@attack("model list planted in .rune/endpoints/, live /v1/models failing", SECTION)
def _(w: World) -> Row:
    failures: list[str] = []
    listed = [MODEL]
    behaviours = {m: answering(GOOD) for m in (*listed, *PLANTED_MODELS)}
    with OpenAIServer(models=listed, behaviours=behaviours) as srv:
        project = _cache_project(w.tmp, srv)
        _plant_model_list(project, srv)  # the old cache's own file name, URL and shape
        srv.models_status = 500
        env = _env(w)
        shown = w.rune("endpoints", "--json", cwd=project, env=env)
        council = w.rune("--n", "2", "--id", "m1", "--json", Q, cwd=project, env=env, ok=(0, 1))
        asked = srv.chat_models()
    for ran in (shown, council):
        named = [m for m in PLANTED_MODELS if m in ran.text]
        expect(failures, not named, f"{ran.label} shows the planted {named}")
    expect(failures, not asked, f"the planted models were asked: {asked}")
    expect(
        failures,
        "no cached or configured models to use" in shown.text,
        "no note says there is no model list to use",
    )
    return w.row(failures, "not listed, not seated: the list is the user's own cache only")
