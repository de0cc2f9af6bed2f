"""A key a voice or an endpoint hands back in disguise is still a key, and never shown.

The council knows two secrets here: an Anthropic key in the environment, which the claude
CLI is allowed to see, and an endpoint's key, sent only in its Authorization header. A
fake claude and a loopback endpoint then print each key every way a model could be made
to: JSON-escaped (which the answer parser turns back into the key), half escaped, base64
in both alphabets at each of the three byte offsets, with and without padding, hex in
either case, percent-encoded, with HTML character references, fullwidth, with an
invisible space inside, concatenated from string literals, and cut in two halves that
sit in two claims. ``rune council`` runs as a real process; its stdout (``--json`` and
the markdown), stderr, the files it wrote, ``rune council show``, the HTTP API the web
view reads and the MCP tools are then searched for each key: as it is, and after every
decoding an outsider would try on them (JSON strings, escapes, percent, entities,
base64, hex), for the whole key and for any ten characters of its random part.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import html
import json
import re
import subprocess
import sys
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from rune_council.core.contract import PerspectiveRequest, Voice
from rune_council.core.redaction import Redactor, redact_model
from tests.fakes.bin import install_fake, path_with
from tests.helpers import answer, claim
from tests.http_server import OpenAIServer, answering

ROOT = Path(__file__).resolve().parents[1]
Q = "Should we shard the orders table?"
# Random tails (no run of eight characters of either repeats in ordinary text).
ANTHROPIC = "sk-ant-api03-" + "Qm7ZtR2vXk9LwP4hYc8NdB1sFg6JuE3aVo5TyKi0"
ENDPOINT_KEY = "sk-lab-" + "Hq3WnZ8cRt6LmV1xPb9KdY4sGf2JuA7eTo5Nk0Ci"
PUBLIC = {ANTHROPIC: "sk-ant-api03-", ENDPOINT_KEY: "sk-lab-"}
MODELS = ["meta/llama-3.3-70b-instruct", "mistralai/mistral-large-2-instruct"]
RUNE = [sys.executable, "-m", "rune_council.cli", "council"]


# --------------------------------------------------------------------------- the attacks


def escaped(text: str, every: int = 1) -> str:
    """``text`` as JSON ``\\u`` escapes (every ``every``-th character), for raw JSON."""
    return "".join(f"\\u{ord(c):04x}" if i % every == 0 else c for i, c in enumerate(text))


def base64_forms(secret: str) -> list[str]:
    data = secret.encode()
    out = []
    for lead in (b"", b"k", b"ke"):  # the secret at byte offset 0, 1 and 2 of a blob
        out.append(base64.b64encode(lead + data).decode())
        out.append(base64.urlsafe_b64encode(lead + data).decode().rstrip("="))
    return out


def disguises(secret: str) -> list[tuple[str, bool]]:
    """(text, is raw JSON) a voice can put in a string of its answer."""
    half = len(secret) // 2
    forms: list[tuple[str, bool]] = [
        (escaped(secret), True),
        (escaped(secret, 2), True),
        (secret.encode().hex(), False),
        (secret.encode().hex().upper(), False),
        ("".join(f"%{b:02X}" for b in secret.encode()), False),
        (quote(secret, safe=""), False),
        ("".join(f"&#{ord(c)};" for c in secret[:6]) + secret[6:], False),
        (unicodedata.normalize("NFKC", secret).translate(_FULLWIDTH), False),
        (secret[:9] + "\u200b" + secret[9:], False),
        (f'"{secret[:half]}" + "{secret[half:]}"', False),
    ]
    forms += [(b, False) for b in base64_forms(secret)]
    return forms


_FULLWIDTH = {c: c + 0xFEE0 for c in range(0x21, 0x7F)}


def leaky_answer(secret: str) -> str:
    """A voice answer that passes GATE and carries ``secret`` in every disguise, its two
    halves in two claims of their own."""
    half = len(secret) // 2
    claims = [claim(f"Attempt {i}: PLACEHOLDER{i}.") for i, _ in enumerate(disguises(secret))]
    claims += [claim(f"First part {secret[:half]}"), claim(f"{secret[half:]} is the rest")]
    text = answer(Q, "NO, and the key is STANCE.", claims)
    # The raw-JSON forms go into the JSON text as they are; the rest as JSON strings.
    text = text.replace("STANCE.", escaped(secret[:3]) + secret[3:])
    for i, (form, raw) in enumerate(disguises(secret)):
        inner = form if raw else json.dumps(form)[1:-1]
        text = text.replace(f"PLACEHOLDER{i}.", inner)
    return text


# --------------------------------------------------------------------------- the search


def exposures(text: str, secret: str) -> list[str]:
    """Where ``secret`` can still be read in ``text``: whole, or ten characters of its
    random part, in the text or in anything decoded from it."""
    tail = secret[len(PUBLIC[secret]) :]
    pieces = [tail[i : i + 10] for i in range(len(tail) - 9)]
    found = []
    for reading in readings(text):
        if secret in reading or any(p in reading for p in pieces):
            found.append(reading[:200])
    return found


def readings(text: str, depth: int = 0) -> Iterator[str]:
    """``text``, and everything an outsider gets by decoding it (a few layers deep)."""
    yield text
    if depth >= 3:
        return
    decoded = {
        unquote(text),
        html.unescape(text),
        unicodedata.normalize("NFKC", text).replace("\u200b", ""),
        re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), text),
    }
    for run in re.findall(r"[A-Za-z0-9+/_-]{12,}", text):
        for align in range(4):
            chunk = run[align:].replace("-", "+").replace("_", "/")
            chunk = chunk[: len(chunk) // 4 * 4]
            with contextlib.suppress(binascii.Error, ValueError):
                decoded.add(base64.b64decode(chunk).decode("latin-1"))
    for run in re.findall(r"[0-9a-fA-F]{16,}", text):
        for align in range(2):
            chunk = run[align:]
            decoded.add(bytes.fromhex(chunk[: len(chunk) // 2 * 2]).decode("latin-1"))
    for document in json_documents(text):
        strings = list(json_strings(document))
        decoded.update(strings)
        decoded.add("".join(strings))
    decoded.discard(text)
    for item in decoded:
        yield from readings(item, depth + 1)


def json_documents(text: str) -> Iterator[Any]:
    for candidate in [text, *text.splitlines()]:
        try:
            yield json.loads(candidate)
        except ValueError:
            continue


def json_strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from json_strings(v)
    elif isinstance(value, list):
        for item in value:
            yield from json_strings(item)


def assert_hidden(texts: dict[str, str]) -> None:
    for where, text in texts.items():
        for secret in (ANTHROPIC, ENDPOINT_KEY):
            seen = exposures(text, secret)
            assert not seen, f"{secret[:10]}... readable in {where}: {seen[0]!r}"


# --------------------------------------------------------------------------- the doors


def setup(tmp: Path, server: OpenAIServer) -> dict[str, str]:
    bin_dir = tmp / "bin"
    install_fake(bin_dir, "claude", answer=leaky_answer(ANTHROPIC))
    for model in MODELS:
        server.behaviours[model] = answering(leaky_answer(ENDPOINT_KEY))
    return {
        "PATH": path_with(bin_dir),
        "HOME": str(tmp),
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(ROOT),
        "RUNE_COUNCIL_LOGIN_SHELL": "0",
        "ANTHROPIC_API_KEY": ANTHROPIC,
        "LAB_KEY": ENDPOINT_KEY,
    }


def rune(tmp: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RUNE, *args],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )


def written(tmp: Path) -> dict[str, str]:
    return {
        str(p.relative_to(tmp)): p.read_text(encoding="utf-8", errors="replace")
        for p in (tmp / ".rune").rglob("*")
        if p.is_file()
    }


def test_disguised_keys_reach_no_output_of_a_council_run(tmp_path: Path) -> None:
    with OpenAIServer(models=list(MODELS)) as server:
        env = setup(tmp_path, server)
        endpoint = ["--endpoint", server.base_url, "--key-env", "LAB_KEY", "--yes"]
        shown: dict[str, str] = {}
        for run_id, extra in (("r-json", ["--json"]), ("r-md", [])):
            out = rune(tmp_path, env, Q, "--id", run_id, *endpoint, *extra)
            assert out.returncode in (0, 1), out.stderr
            shown[f"{run_id} stdout"] = out.stdout
            shown[f"{run_id} stderr"] = out.stderr
        # Both keys really were in play: sent to the endpoint and given to the CLI.
        assert {s.authorization for s in server.requests()} == {f"Bearer {ENDPOINT_KEY}"}
    for args in (["show", "r-json"], ["show", "r-json", "--json"], ["show", "r-md"]):
        out = rune(tmp_path, env, *args)
        assert out.returncode == 0, out.stderr
        shown[" ".join(args)] = out.stdout
    files = written(tmp_path)
    assert {".rune/council/run-r-json.json", ".rune/council/run-r-md.json"} <= set(files)
    assert_hidden({**shown, **files})

    # The voices were heard, their claims parsed and kept, only the keys cut out of them.
    doc = json.loads(shown["r-json stdout"])
    voices = [v for v in doc["voices"] if v["status"] == "complete"]
    assert {v["runtime"].split(":")[0] for v in voices} >= {"claude"}
    assert any(":" in v["runtime"] for v in voices), [v["runtime"] for v in voices]
    for voice in voices:
        texts = [c["text"] for c in voice["claims"]]
        assert len(texts) == len(disguises(ANTHROPIC)) + 2
        assert sum("[redacted]" in t for t in texts) == len(texts)
        assert texts[-1].endswith("is the rest") and texts[0].startswith("Attempt 0: ")
        assert "[redacted]" in voice["stance"]
    assert "[redacted]" in shown["r-md stdout"]


def test_disguised_keys_reach_neither_the_http_api_nor_the_mcp_tools(tmp_path: Path) -> None:
    from tests.mcp_client import connect, text_of
    from tests.web.serving import start

    with OpenAIServer(models=list(MODELS)) as server:
        env = setup(tmp_path, server)
        config = tmp_path / ".config" / "rune-council" / "council.toml"
        config.parent.mkdir(parents=True)
        config.write_text(f'[endpoints.lab]\nbase_url = "{server.base_url}"\nkey_env = "LAB_KEY"\n')
        bodies: dict[str, str] = {}

        served = start(tmp_path, "--yes", env=env)
        try:
            body = {"request": {"id": "via-http", "question": Q, "n": 3}, "endpoints": ["lab"]}
            posted = served.post(body)
            assert posted.status_code == 202, posted.text
            bodies["POST /v1/councils"] = posted.text
            served.wait_status("via-http", {"complete", "failed"}, timeout=120)
            for path in ("/v1/councils/via-http", "/v1/councils", "/v1/councils/via-http/events"):
                reply = served.client.get(path, headers={"Accept": "text/event-stream"})
                bodies[f"GET {path}"] = reply.text
        finally:
            served.stop()
        bodies["serve log"] = served.log.read_text(errors="replace")

        async def through_mcp() -> None:
            async with connect(tmp_path, "--yes", env=env) as session:
                made = await session.call_tool("convene", {"question": Q, "id": "via-mcp", "n": 3})
                assert not made.is_error, text_of(made)
                bodies["mcp convene text"] = text_of(made)
                bodies["mcp convene structured"] = json.dumps(made.structured_content)
                for run_id in ("via-mcp", "via-http"):
                    got = await session.call_tool("show_run", {"run_id": run_id})
                    assert not got.is_error, text_of(got)
                    bodies[f"mcp show_run {run_id}"] = text_of(got)
                    bodies[f"mcp show_run {run_id} structured"] = json.dumps(got.structured_content)

        asyncio.run(through_mcp())
    doc = json.loads(bodies["GET /v1/councils/via-http"])
    assert any("[redacted]" in c["text"] for v in doc["voices"] for c in v["claims"])
    structured = json.loads(bodies["mcp convene structured"])
    assert any("[redacted]" in c["text"] for v in structured["voices"] for c in v["claims"])
    assert_hidden({**bodies, **written(tmp_path)})


# --------------------------------------------------------------------------- the rule itself


def test_every_disguise_is_cut_and_ordinary_text_is_left_alone() -> None:
    redactor = Redactor([ANTHROPIC])
    for form, raw in disguises(ANTHROPIC):
        text = f"before {form} after"
        if raw:  # as the answer parser will read it
            text = json.loads(json.dumps(text).replace(json.dumps(form)[1:-1], form))
        out = redactor.text(text)
        assert "[redacted]" in out and not exposures(out, ANTHROPIC), (form, out)
        assert out.startswith("before ") and out.endswith(" after"), out
    prose = (
        "Keys of this vendor start with sk-ant-api03- and are 108 characters long; "
        "the word password, the path /home/user/.config and c2hhcmRpbmc= stay as they are."
    )
    assert redactor.text(prose) == prose
    assert redactor.text(base64.b64encode(bytes(range(256)) * 4).decode()).count("[") == 0


def test_a_key_cut_across_neighbouring_fields_is_cut_in_each() -> None:
    redactor = Redactor([ANTHROPIC])
    # Three characters of the random part: too few to be a fragment on their own.
    head, rest = ANTHROPIC[:16], ANTHROPIC[16:]
    assert redactor.strings([f"token: {head}", rest, "next"]) == [
        "token: [redacted]",
        "[redacted]",
        "next",
    ]
    # Seven characters a field, each too short to be caught alone.
    pieces = [ANTHROPIC[i : i + 7] for i in range(0, len(ANTHROPIC), 7)]
    assert redactor.text(pieces[3]) == pieces[3]
    assert set(redactor.strings(["before", *pieces, "after"])) == {"before", "[redacted]", "after"}
    assert redactor.strings(["nothing", "here"]) == ["nothing", "here"]


def test_a_parsed_answer_is_scrubbed_field_by_field_and_stays_loadable() -> None:
    half = len(ANTHROPIC) // 2
    voice = Voice(
        id="v1",
        source="external-cli",
        runtime="claude",
        status="complete",
        stance=f"NO {ANTHROPIC}",
        claims=[
            {"id": "v1.c1", "voice_id": "v1", "text": f"one {ANTHROPIC[:half]}"},
            {"id": "v1.c2", "voice_id": "v1", "text": f"{ANTHROPIC[half:]} two"},
        ],
    )
    assert redact_model(voice, Redactor([ANTHROPIC]))
    assert voice.stance == "NO [redacted]"
    assert [c.text for c in voice.claims] == ["one sk-ant[redacted]", "[redacted] two"]
    assert voice.status == "complete"
    assert Voice.model_validate_json(voice.model_dump_json()) == voice
    request = PerspectiveRequest(id="t", question=Q)
    assert not redact_model(request, Redactor([ANTHROPIC]))


def test_the_recorder_nets_what_no_runtime_scrubbed(tmp_path: Path) -> None:
    """A voice the council calls in-process (a library runtime, a chairman callable)
    passes through no runtime's redaction: the recorder's net catches the key in its raw
    text and in every parsed field, the result the caller gets back is the one written,
    and verify still reproduces it from the recorded raw answers."""
    from rune_council import CouncilOptions, convene
    from rune_council.runs import load
    from rune_council.runtimes.base import remember_secrets
    from rune_council.testing import ScriptedRuntime
    from rune_council.verify import verify

    remember_secrets([ANTHROPIC])  # as a runtime of this process does when it scrubs
    voices = [
        ScriptedRuntime(leaky_answer(ANTHROPIC), name="lib-a", family="anthropic"),
        ScriptedRuntime(leaky_answer(ANTHROPIC), name="lib-b", family="openai"),
    ]
    options = CouncilOptions(runtimes=voices, rune_dir=tmp_path / ".rune")
    result = convene({"id": "net", "question": Q, "n": 2}, options)
    assert result.voices_valid == 2, result.notes
    returned = result.model_dump_json()
    on_disk = (tmp_path / ".rune" / "council" / "run-net.json").read_text()
    assert not exposures(returned, ANTHROPIC) and not exposures(on_disk, ANTHROPIC)
    for voice in result.voices:
        assert all("[redacted]" in c.text for c in voice.claims)
        assert voice.raw is not None and "[redacted]" in voice.raw.text
    assert verify(load(tmp_path / ".rune" / "council" / "run-net.json")).reproduced
