"""A tally's printed lines keep the printing filter's protection on its fast path.

``echo`` and ``echo_json`` skip the per-character filters for text that is plain printable
ASCII; anything else (an escape, a carriage return in text, DEL, a C1 control, a
bidirectional override, a URL credential) must come out exactly as the filters make it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rune_council.cli.app import echo, echo_json
from rune_council.core.safetext import json_text, plain

# The characters the filters care about, mixed with plain text, so that both paths are hit.
TRICKY = st.sampled_from(
    [
        *("\x1b", "\x1b]0;t\x07", "\x1b[2J", "\r", "\n", "\t", "\x7f", "\x9b", "\x00", "\u202e"),
        *("http://u:pw@host/x", "é", "a", " ", "p1>p2", '"', "\\", "://", "[x]"),
    ]
)
TEXT = st.lists(TRICKY, max_size=12).map("".join) | st.text(max_size=40)


# capsys is read out before each example, so one fixture serves them all.
@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(TEXT)
def test_echo_prints_what_the_filter_makes(capsys: pytest.CaptureFixture[str], text: str) -> None:
    capsys.readouterr()
    echo(text, nl=False)
    assert capsys.readouterr().out == plain(text)


# capsys is read out before each example, so one fixture serves them all.
@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(TEXT)
def test_echo_json_prints_what_the_filter_makes(
    capsys: pytest.CaptureFixture[str], text: str
) -> None:
    document = json.dumps({"k": text}, ensure_ascii=False) + "\r\n"
    for given_ in (document, document.encode()):
        capsys.readouterr()
        echo_json(given_, nl=False)
        assert capsys.readouterr().out == json_text(document)


def test_a_hostile_tally_prints_inert(tmp_path: Path) -> None:
    """Plain ballots and hostile lines in one transcript, through the whole command."""
    lines = ["@phase propose", 'PROPOSE p1 "fine"', 'PROPOSE p2 "t\x1b]0;pwned\x07x"']
    lines += ["@phase rank", *(f"m{i} RANK p1>p2 conf=0.5" for i in range(3000))]
    lines += ["bad \x9b31m line", "see http://user:secret@host/x", "m9 RANK p2>p1 \x1b[2J"]
    path = tmp_path / "t.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for extra in ([], ["--json"]):
        out = subprocess.run(
            [sys.executable, "-m", "rune_council.cli", "council", "tally", str(path), *extra],
            capture_output=True,
            check=False,
        ).stdout
        assert b"m2999" in out
        for bad in (b"\x1b", b"\x07", "\x9b".encode(), b"secret"):
            assert bad not in out, (extra, bad)
        if extra:
            report = json.loads(out)
            assert report["scores"][0]["label"] == "p1"
            assert "t\x1b]0;pwned\x07x" in [s["text"] for s in report["scores"]]
