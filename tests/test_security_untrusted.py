"""Untrusted bytes never crash a reader: fuzzing every parser, plus the attacks that once did.

Each property states what a user would notice: a parser either returns a value or raises the
one error its caller turns into a recorded reason (a dropped voice, an unreadable file, a
one-line exit 2) -- never ``RecursionError``, ``MemoryError`` or anything else that ends in
exit 70. The endpoint attacks run against a real HTTP server on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rune_council.core import safejson, safetoml
from rune_council.core.answer import extract_answer
from rune_council.core.errors import RunFileError
from rune_council.core.safetext import markup, plain
from rune_council.runs import load
from rune_council.runtimes import clis, parsers
from rune_council.runtimes.clis import BUILTIN
from rune_council.runtimes.http import EndpointClient, _completion_text, _Malformed
from rune_council.safefile import NotRegularFile, read_capped

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_RUN = next((ROOT / ".rune-example" / "council").glob("run-*.json")).read_text()
DEEP = 100_000

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Inputs an attacker would try: deep nesting of every kind, huge flat values, raw bytes,
# a real run file cut anywhere, and text full of quotes, escapes and control characters.
_hostile_chars = st.sampled_from(
    [*'[]{}"\\:,', "\x1b", "\x1b[2J", "\x1b]0;t\x07", "\x9b", "\x00", "\ud7ff", "\n"]
)
nested = st.builds(
    lambda opener, n, tail: opener * n + tail,
    st.sampled_from(["[", "{", '{"a":', '[{"a":[', "[" * 3 + '"\\"' + "]"]),
    st.integers(min_value=90, max_value=20_000),
    st.sampled_from(["", "]", "}", "]]]]"]),
)
escape_laden = st.lists(_hostile_chars | st.text(max_size=8), max_size=200).map("".join)
truncated = st.integers(min_value=0, max_value=len(EXAMPLE_RUN)).map(lambda k: EXAMPLE_RUN[:k])
texts = nested | escape_laden | truncated | st.text(max_size=500)
blobs = st.binary(max_size=2000) | texts.map(lambda t: t.encode("utf-8", "surrogatepass"))


@FUZZ
@given(blobs)
def test_bounded_json_loader_only_ever_raises_its_own_error(data: bytes) -> None:
    try:
        safejson.loads(data)
    except safejson.UnreadableJSON as exc:
        assert str(exc)  # a reason a user can read


@FUZZ
@given(texts)
def test_answer_extraction_turns_anything_into_an_answer_or_a_reason(text: str) -> None:
    for wrapped in (text, f"prose {text} more", f"```json\n{text}\n```"):
        result = extract_answer(wrapped)
        assert (result.answer is None) == (result.reason != "ok")


# Every CLI's parser, from its own module under runtimes/clis/ (plain text included).
PARSERS = list(dict.fromkeys(a.parse for a in BUILTIN.values()))


@FUZZ
@given(texts, texts)
def test_every_cli_output_parser_returns_an_answer_or_a_reason(out: str, err: str) -> None:
    for parse in PARSERS:
        parsed = parse(out, err)
        assert isinstance(parsed, parsers.Parsed)
        assert parsed.error is None or isinstance(parsed.error, str)


@FUZZ
@given(texts.map(lambda t: t.encode("utf-8", "surrogatepass")))
def test_endpoint_completion_body_is_an_answer_or_malformed(raw: bytes) -> None:
    try:
        _completion_text(raw)
    except _Malformed:
        pass
    except Exception as exc:  # the reported-error path is fine too, nothing else is
        assert type(exc).__name__ == "_ErrorReported", repr(exc)


@FUZZ
@given(nested | escape_laden | st.text(max_size=300))
def test_toml_reader_only_ever_raises_its_own_error(text: str) -> None:
    for doc in (text, f"a = {text}", f"[t]\nx = {text}"):
        try:
            safetoml.loads_toml(doc)
        except safetoml.UnreadableTOML as exc:
            assert str(exc)


@FUZZ
@given(blobs)
def test_a_run_file_is_a_result_or_one_run_file_error(tmp_path_factory: Any, data: bytes) -> None:
    path = tmp_path_factory.mktemp("runs") / "run-x.json"
    path.write_bytes(data)
    try:
        load(path)
    except RunFileError as exc:
        assert "\n" not in str(exc).strip() or str(exc)


@FUZZ
@given(escape_laden | st.text())
def test_sanitized_text_has_no_control_characters_but_newline_and_tab(text: str) -> None:
    shown = plain(text)
    assert not any((ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F for c in shown), (
        repr(shown)
    )
    assert plain(shown) == shown


@settings(max_examples=400, deadline=None)
@given(escape_laden | st.text(alphabet="[]/\\ab =#@", max_size=60))
def test_rich_shows_escaped_text_literally(text: str) -> None:
    from rich.text import Text

    # Parsing the escaped text as markup gives back exactly the sanitized characters: no
    # tag is applied, none is rejected with MarkupError. Emoji codes (":v:") are not markup;
    # the consoles that print voice text have them off (test below).
    assert Text.from_markup(markup(text), emoji=False).plain == plain(text)


def test_the_live_view_prints_emoji_codes_as_text() -> None:
    import io

    from rune_council.cli.live import view_console

    out = io.StringIO()
    view_console(out).print(markup("a :v: and :smile: [bold]x[/bold]"))
    assert out.getvalue().strip() == "a :v: and :smile: [bold]x[/bold]"


@pytest.mark.parametrize(
    "hostile",
    [
        "[/bold]",
        "[/usr/bin/x]",
        "[bold red]not bold[/]",
        "title\x1b]0;pwned\x07",
        "clip\x1b]52;c;aGVsbG8=\x1b\\",
        "\x1b[2Jwiped",
        "\x9b2J8-bit",
    ],
)
def test_the_catalogued_escapes_do_not_survive(hostile: str) -> None:
    from rich.console import Console

    console = Console(file=__import__("io").StringIO(), force_terminal=True, width=200)
    console.print(markup(hostile))  # raises MarkupError if anything is still markup
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert "\x1b]" not in out and "\x1b[2J" not in out and "\x9b" not in out


# --- the catalogue: deep nesting everywhere --------------------------------------------------


def test_deep_nesting_in_each_json_reader_is_a_reason_not_a_crash(tmp_path: Path) -> None:
    bomb = "[" * DEEP
    with pytest.raises(safejson.UnreadableJSON, match="nests deeper"):
        safejson.loads(bomb)
    assert "no JSON" in extract_answer(bomb).reason or extract_answer(bomb).answer is None
    assert clis.claude.parse(bomb, "").error is not None
    assert clis.codex.parse("\n".join([bomb] * 3), "").error is not None
    with pytest.raises(_Malformed):
        _completion_text(bomb.encode())
    run = tmp_path / "run-deep.json"
    run.write_text('{"id": ' + bomb)
    with pytest.raises(RunFileError, match="nests deeper"):
        load(run)
    with pytest.raises(safetoml.UnreadableTOML, match="nests deeper"):
        safetoml.loads_toml("a = " + bomb)


def test_a_real_run_file_still_loads() -> None:
    for path in (ROOT / ".rune-example" / "council").glob("run-*.json"):
        assert load(path).id


# --- the catalogue: files that are not files -------------------------------------------------


def test_fifo_device_and_sparse_files_are_refused_or_capped(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(NotRegularFile, match="FIFO"):
        read_capped(fifo, 1000)  # would block for ever with a plain open()
    with pytest.raises(NotRegularFile, match="device"):
        read_capped("/dev/zero", 1000)
    sparse = tmp_path / "sparse"
    with open(sparse, "wb") as fh:
        fh.truncate(3 * 1024**3)  # 3 GB that take no disk space
    data, cut = read_capped(sparse, 2_000_000)
    assert len(data) == 2_000_000 and cut
    with pytest.raises(RunFileError, match="not a regular file"):
        load(fifo)


# --- the catalogue: a hostile endpoint on 127.0.0.1 ------------------------------------------


class _Hostile(BaseHTTPRequestHandler):
    body = b""

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def _reply(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def do_GET(self) -> None:
        self._reply()

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self._reply()


@pytest.fixture
def hostile_server() -> Iterator[tuple[str, type[_Hostile]]]:
    handler = type("H", (_Hostile,), {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    try:
        yield f"http://{host}:{port}/v1", handler
    finally:
        server.shutdown()
        server.server_close()


def test_nested_model_list_and_answer_from_a_live_endpoint(
    hostile_server: tuple[str, type[_Hostile]],
) -> None:
    from rune_council.core.errors import EndpointCallError

    url, handler = hostile_server
    handler.body = b'{"data": ' + b"[" * DEEP
    client = EndpointClient("hostile", url)

    async def models() -> list[str]:
        try:
            return await client.list_models(timeout_s=10)
        finally:
            await client.aclose()

    with pytest.raises(EndpointCallError) as caught:
        asyncio.run(models())
    assert caught.value.kind == "malformed"

    handler.body = b'{"choices": [{"message": {"content": ' + b"[" * DEEP + b"}}]}"

    async def chat() -> Any:
        try:
            return await client.chat(
                "m", "prompt", timeout_s=10, max_output_bytes=10_000_000, stream=False
            )
        finally:
            await client.aclose()

    result = asyncio.run(chat())
    assert result.outcome == "malformed"
    assert "nests deeper" in result.detail


# --- the commands that read files: hostile files never reach the internal-error exit ---------


def _invoke(*args: str) -> tuple[int, str]:
    from typer.testing import CliRunner

    from rune_council.cli.app import app

    result = CliRunner().invoke(app, ["council", *args])
    # An unexpected exception is what ``rune`` turns into exit 70; none may escape.
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    return result.exit_code, result.output


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(blobs)
def test_commands_reading_hostile_files_exit_cleanly(tmp_path_factory: Any, data: bytes) -> None:
    rune = tmp_path_factory.mktemp("rune")
    council = rune / "council"
    council.mkdir()
    path = council / "run-fuzz.json"
    path.write_bytes(data)
    for args in (
        ["show", str(path)],
        ["verify", str(path)],
        ["tally", str(path)],
        ["list", "--rune-dir", str(rune)],
    ):
        code, output = _invoke(*args)
        assert code != 70, (args, output)
        for seq in ("\x1b]", "\x1b[2J", "\x9b"):
            assert seq not in output, (args, seq)


def test_tally_and_show_refuse_a_fifo_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "run-fifo.json"
    os.mkfifo(fifo)
    for args in (["tally", str(fifo)], ["show", str(fifo)]):
        code, output = _invoke(*args)
        assert code == 2, (args, output)
        assert "not a regular file" in output


@FUZZ
@given(escape_laden | st.text(max_size=200))
def test_renderers_print_hostile_fields_as_text(text: str) -> None:
    from rune_council.core.contract import CouncilResult
    from rune_council.deliberation.render import render_deliberation
    from rune_council.render import render

    for path in sorted((ROOT / ".rune-example" / "council").glob("run-*.json"))[:2]:
        result = CouncilResult.model_validate_json(path.read_text())
        result.question = text
        result.notes.append(text)
        for voice in result.voices:
            voice.stance = text
            voice.runtime = text
            voice.drop_reason = text
            for c in voice.claims:
                c.text = text
        shown = render(result) + render_deliberation(result)
        assert not any((ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F for c in shown)
