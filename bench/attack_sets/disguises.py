"""Disguised secrets: a key a voice or an endpoint hands back in disguise is still a key.

The setup is the test suite's (tests/test_security_redaction.py): an Anthropic key in the
environment of a fake claude, an endpoint key sent only in the Authorization header of a
loopback endpoint (``--key-env LAB_KEY``). Each attack has both hand their key back in one
disguise, inside a claim of an otherwise valid answer. ``rune council --json`` and
``rune council show`` run as real processes.

Held: after JSON-decoding every string and undoing escapes, percent, entities, base64 and
hex (the suite's ``exposures``), neither key nor any ten characters of its random part
can be read in stdout, stderr or any file under .rune/; and the claims are still recorded,
with ``[redacted]`` where the key was.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

from tests.fakes.bin import install_fake
from tests.helpers import answer, claim
from tests.http_server import OpenAIServer, answering
from tests.test_security_redaction import (
    ANTHROPIC,
    ENDPOINT_KEY,
    MODELS,
    Q,
    disguises,
    exposures,
    setup,
)

from .kit import OFFLINE, Row, World, attack, expect

SECTION = "disguised secrets"
Forms = Callable[[str], list[tuple[str, bool]]]  # (text, is raw JSON) for a secret


def _pick(*at: int) -> Forms:
    """Forms from the suite's list of disguises, by position: 0-1 JSON escapes (all, every
    second character), 2-3 hex, 4-5 percent, 6 HTML entities, 7 fullwidth, 8 zero-width
    space, 9 concatenated literals, 10-15 base64 std/urlsafe at byte offsets 0, 1, 2."""
    return lambda secret: [disguises(secret)[i] for i in at]


def _halves(secret: str) -> list[tuple[str, bool]]:
    half = len(secret) // 2
    return [(f"First part {secret[:half]}", False), (f"{secret[half:]} is the rest", False)]


def carrying(forms: list[tuple[str, bool]]) -> str:
    """A valid answer with one claim per form, and one plain claim."""
    claims = [claim(f"Attempt {i}: PLACEHOLDER{i}.") for i in range(len(forms))]
    text = answer(Q, "NO", [*claims, claim("The plan has no rollback step")])
    for i, (form, raw) in enumerate(forms):
        text = text.replace(f"PLACEHOLDER{i}.", form if raw else json.dumps(form)[1:-1])
    return str(text)


def _claims(doc: dict[str, Any], runtime: Callable[[str], bool]) -> list[list[str]]:
    return [
        [c["text"] for c in v["claims"] if c["text"].startswith("Attempt")]
        for v in doc.get("voices", [])
        if v.get("status") == "complete" and runtime(v.get("runtime", ""))
    ]


def _disguised(forms: Forms | None, *, echo_auth: bool = False) -> Callable[[World], Row]:
    def run(w: World) -> Row:
        failures: list[str] = []
        w.secrets += [ANTHROPIC, ENDPOINT_KEY]
        with OpenAIServer(models=list(MODELS)) as server:
            env = {**setup(w.tmp, server), **OFFLINE}
            honest = carrying([])
            install_fake(w.bin, "claude", answer=carrying(forms(ANTHROPIC)) if forms else honest)
            for model in MODELS:
                if echo_auth:
                    # What the key was sent as, base64 of the whole header, handed back.
                    def echo(_prompt: str) -> str:
                        sent = server.requests()[-1].authorization or ""
                        return carrying([(base64.b64encode(sent.encode()).decode(), False)])

                    server.behaviours[model] = answering(echo)
                else:
                    assert forms is not None
                    server.behaviours[model] = answering(carrying(forms(ENDPOINT_KEY)))
            endpoint = ["--endpoint", server.base_url, "--key-env", "LAB_KEY", "--yes"]
            ran = w.rune(Q, "--id", "r", *endpoint, "--json", env=env, ok=(0, 1), timeout=180)
            sent = {s.authorization for s in server.requests()}
        expect(failures, sent == {f"Bearer {ENDPOINT_KEY}"}, "the endpoint never got its key")
        w.rune("show", "r", env=env)
        w.rune("show", "r", "--json", env=env)
        try:
            doc = json.loads(ran.stdout)
        except ValueError:
            doc = {}
        from_claude = _claims(doc, lambda r: r.split(":")[0] == "claude")
        from_endpoint = _claims(doc, lambda r: ":" in r)
        if forms:
            expect(failures, bool(from_claude), "no complete claude voice to read")
        expect(failures, bool(from_endpoint), "no complete endpoint voice to read")
        for texts in [*(from_claude if forms else []), *from_endpoint]:
            kept = bool(texts) and all("[redacted]" in t for t in texts)
            expect(failures, kept, f"claims not kept with [redacted]: {texts[:2]!r}")
        outputs = {f"{r.label} stdout": r.stdout for r in w.ran}
        outputs |= {f"{r.label} stderr": r.stderr for r in w.ran}
        outputs |= {
            str(p.relative_to(w.tmp)): p.read_text("utf-8", "replace")
            for p in (w.tmp / ".rune").rglob("*")
            if p.is_file() and not p.is_symlink()
        }
        leaks = [
            f"{secret[:10]}... readable in {where}"
            for where, text in outputs.items()
            for secret in (ANTHROPIC, ENDPOINT_KEY)
            if exposures(text, secret)
        ]
        return w.row(
            failures,
            "no decoding reads either key; the claims kept with [redacted]",
            extra_leaks=leaks,
        )

    return run


for _name, _forms in (
    ("JSON \\u escapes, raw in the answer JSON", _pick(0, 1)),
    ("base64 at byte offset 0", _pick(10)),
    ("base64 at byte offset 1", _pick(12)),
    ("base64 at byte offset 2", _pick(14)),
    ("base64 urlsafe unpadded (offsets 0, 1, 2)", _pick(11, 13, 15)),
    ("hex (lower and upper case)", _pick(2, 3)),
    ("percent-encoded", _pick(4, 5)),
    ("HTML character references", _pick(6)),
    ("fullwidth characters", _pick(7)),
    ("zero-width space inside", _pick(8)),
    ('"a" + "b" concatenation', _pick(9)),
    ("two halves in two claims", _halves),
):
    attack(f"key as {_name}", SECTION)(_disguised(_forms))

attack("endpoint answers base64 of its Authorization header", SECTION)(
    _disguised(None, echo_auth=True)
)
