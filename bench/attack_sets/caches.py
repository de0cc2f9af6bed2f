"""Stale family labels, the runtimes cache, and dotfiles kept as symlinks.

The wrappers (opencode, aider) and the CLIs are the test suite's fakes under their real
names; how each attack changes what a wrapper will call, or plants a cache, comes from
tests/test_security_family_cache.py, and the dotfile layouts from
tests/test_install_symlinks.py. Every step is a real ``rune council`` process.

Held: the attack's own criterion (the stamp counts the family the wrapper will really call,
a CLI off the PATH is never run, a replaced binary is probed again, a planted cache is not
obeyed, a symlinked dotfile stays a link and gets its bytes back).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from tests.fakes.bin import install_fake, path_with
from tests.helpers import answer
from tests.test_install_symlinks import LAUNCH, ORIGINAL, council_entry, files_under, link
from tests.test_security_family_cache import (
    OPENAI,
    ROLLBACK,
    Q,
    _edit_in_place,
    _inline_variable,
    env_for,
    opencode_config,
    write_json,
)

from .kit import OFFLINE, Ran, Row, World, attack, expect

SECTION = "stale labels, caches, dotfiles"
ANSWER = answer(Q, "NO", [ROLLBACK])
HAIKU = "anthropic/claude-haiku-45"  # what _edit_in_place writes over OPENAI


def _env(w: World, **extra: str) -> dict[str, str]:
    return {"LANG": "C.UTF-8", **env_for(w.tmp, **extra), **OFFLINE}


def _json(ran: Ran) -> dict[str, Any]:
    try:
        doc: dict[str, Any] = json.loads(ran.stdout)
    except ValueError:
        return {}
    return doc


def _detected(w: World, env: dict[str, str]) -> dict[str, dict[str, Any]]:
    doc = _json(w.rune("detect", "--json", env=env))
    return {d["runtime"]: d for d in doc.get("detected", [])}


def _families(doc: dict[str, Any], runtime: str) -> set[str]:
    return {v["model_family"] for v in doc.get("voices", []) if v["runtime"] == runtime}


def _switched(
    failures: list[str], w: World, env: dict[str, str], wrapper: str, was: str
) -> dict[str, Any]:
    """A council without --refresh after the wrapper was pointed elsewhere."""
    doc = _json(w.rune(Q, "--json", "--id", "switched", env=env))
    stamp = doc.get("decorrelation")
    expect(failures, stamp != "MULTI_FAMILY", f"stamped {stamp} with both voices on anthropic")
    got = _families(doc, wrapper)
    expect(failures, got == {"anthropic"}, f"{wrapper} voice labelled {sorted(got)} (was {was})")
    return doc


def _opencode(w: World) -> dict[str, str]:
    install_fake(w.bin, "claude", answer=ANSWER)
    install_fake(w.bin, "opencode", answer=ANSWER)
    write_json(opencode_config(w.tmp), {"model": OPENAI})
    return _env(w)


@attack("stale family: opencode config edited, size and mtime kept", SECTION)
def _(w: World) -> Row:
    failures: list[str] = []
    env = _opencode(w)
    first = _detected(w, env).get("opencode", {}).get("model_family")
    expect(failures, first == "openai", f"opencode first detected as {first}")
    _edit_in_place(w.tmp, env)
    _switched(failures, w, env, "opencode", "openai")
    return w.row(failures, f"re-read: opencode voice anthropic ({HAIKU}), stamp not MULTI_FAMILY")


@attack("stale family: only OPENCODE_CONFIG_CONTENT changed", SECTION)
def _(w: World) -> Row:
    failures: list[str] = []
    env = _opencode(w)
    _detected(w, env)
    _switched(failures, w, _inline_variable(w.tmp, env), "opencode", "openai")
    return w.row(failures, "re-read: opencode voice anthropic, stamp not MULTI_FAMILY")


@attack("stale family: only AIDER_MODEL changed", SECTION)
def _(w: World) -> Row:
    failures: list[str] = []
    install_fake(w.bin, "claude", answer=ANSWER)
    install_fake(w.bin, "aider", answer=ANSWER)
    env = _env(w, AIDER_MODEL=OPENAI)
    first = _detected(w, env).get("aider", {}).get("model_family")
    expect(failures, first == "openai", f"aider first detected as {first}")
    _switched(failures, w, {**env, "AIDER_MODEL": "anthropic/claude-sonnet-4-5"}, "aider", "openai")
    return w.row(failures, "re-read: aider voice anthropic, stamp not MULTI_FAMILY")


@attack("cached CLI no longer on PATH", SECTION)
def _(w: World) -> Row:
    failures: list[str] = []
    calls = w.tmp / "codex-calls"
    for name in ("claude", "gemini"):
        install_fake(w.bin, name, answer=ANSWER)
    codex = install_fake(w.tmp / "extra", "codex", answer=ANSWER, argv_log=str(calls))
    with_codex = _env(w, PATH=f"{w.tmp / 'extra'}:{path_with(w.bin)}")
    status = _detected(w, with_codex).get("codex", {}).get("status")
    expect(failures, status == "available", f"codex first detected as {status}")
    doc = _json(w.rune(Q, "--json", "--id", "gone", env=_env(w)))
    expect(failures, not calls.exists(), f"{codex} was run after PATH dropped it")
    notes = [n for n in doc.get("notes", []) if n.startswith("codex not seated")]
    expect(failures, bool(notes), "no note starting 'codex not seated'")
    return w.row(failures, "codex never ran; a note says 'codex not seated' and why")


@attack("binary replaced under the same name, old mtime restored", SECTION)
def _(w: World) -> Row:
    failures: list[str] = []
    claude = install_fake(w.bin, "claude", version="1.2.3")
    env = _env(w)
    first = _detected(w, env).get("claude", {}).get("version")
    expect(failures, first == "1.2.3", f"claude first detected as {first}")
    before = claude.stat()
    staged = install_fake(w.tmp / "staging", "claude", version="9.9.9")
    os.replace(staged, claude)
    os.utime(claude, ns=(before.st_atime_ns, before.st_mtime_ns))
    again = _detected(w, env).get("claude", {}).get("version")
    expect(failures, again == "9.9.9", f"detect --json still says {again}")
    return w.row(failures, "detect --json shows 9.9.9: the new program was probed")


def _planted_cache(w: World, plant: str) -> Row:
    failures: list[str] = []
    for name in ("claude", "gemini"):
        install_fake(w.bin, name, answer=ANSWER)
    env = _env(w)
    _detected(w, env)
    cache = w.tmp / ".rune" / "runtimes.json"
    ran_marker = w.tmp / "planted-script-ran"
    if plant == "script":
        script = w.tmp / "not-claude.sh"
        script.write_text(f"#!/bin/sh\ntouch {ran_marker}\ncat >/dev/null\necho '{{}}'\n")
        script.chmod(0o755)
        doc = json.loads(cache.read_text("utf-8"))
        for entry in doc["detected"]:
            if entry["runtime"] == "claude":
                entry["path"] = str(script)
        cache.write_text(json.dumps(doc), encoding="utf-8")
    else:
        cache.write_text("{ not json", encoding="utf-8")
    doc = _json(w.rune(Q, "--json", "--id", "planted", env=env))
    expect(failures, not ran_marker.exists(), "the script the cache named was run")
    named = [n for n in doc.get("notes", []) if str(cache) in n]
    expect(failures, bool(named), "no note names the cache")
    seated = sorted({v["runtime"] for v in doc.get("voices", [])})
    expect(failures, seated == ["claude", "gemini"], f"seated {seated}")
    return w.row(failures, "the cache was not obeyed and a note names it; claude and gemini sat")


@attack("planted runtimes cache: claude's path is another script", SECTION)
def _(w: World) -> Row:
    return _planted_cache(w, "script")


@attack("planted runtimes cache: garbage", SECTION)
def _(w: World) -> Row:
    return _planted_cache(w, "garbage")


def _install_env(home: Path) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8", **OFFLINE}


@attack("install into a symlinked ~/.claude.json, then --uninstall", SECTION)
def _(w: World) -> Row:
    failures: list[str] = []
    home = w.tmp / "home"
    home.mkdir()
    target = w.tmp / "dotfiles" / ".claude.json"
    target.parent.mkdir()
    target.write_text(ORIGINAL["claude"], encoding="utf-8")
    target.chmod(0o600)
    config = home / ".claude.json"
    link(config, target)
    pointed = os.readlink(config)
    env = _install_env(home)
    w.rune("install", "claude", cwd=home, env=env)
    expect(failures, config.is_symlink() and os.readlink(config) == pointed, "link replaced")
    try:
        entry = council_entry("claude", target.read_text("utf-8"))
        expect(failures, [entry["command"], *entry["args"]] == LAUNCH, "wrong council entry")
    except (KeyError, ValueError):
        failures.append("the link's target got no council entry")
    w.rune("install", "claude", "--uninstall", cwd=home, env=env)
    expect(failures, config.is_symlink() and os.readlink(config) == pointed, "link replaced")
    same = target.read_bytes() == ORIGINAL["claude"].encode("utf-8")
    expect(failures, same, "after --uninstall the target's bytes differ from the original")
    mode = stat.S_IMODE(target.stat().st_mode)
    expect(failures, mode == 0o600, f"target mode {mode:o}, was 600")
    return w.row(failures, "still the same link; target got the entry, then its bytes back, 0600")


@attack("project install where .claude and .mcp.json link into HOME", SECTION)
def _(w: World) -> Row:
    failures: list[str] = []
    home = w.tmp / "home"
    (home / ".claude").mkdir(parents=True)
    project = w.tmp / "project"
    project.mkdir()
    (project / ".claude").symlink_to(home / ".claude")
    (home / "settings.json").write_text('{"keep": true}\n', encoding="utf-8")
    (project / ".mcp.json").symlink_to(home / "settings.json")
    before = files_under(home)
    ran = w.rune("install", "claude", "--project", cwd=project, env=_install_env(home), ok=(2,))
    expect(failures, "outside the project" in ran.stderr, "no 'outside the project' line")
    expect(failures, files_under(home) == before, "HOME changed")
    expect(failures, list((home / ".claude").iterdir()) == [], "wrote into ~/.claude")
    return w.row(failures, "exit 2 'outside the project'; HOME unchanged")


@attack("install --force over a ~/.claude.json link to nothing", SECTION)
def _(w: World) -> Row:
    failures: list[str] = []
    home = w.tmp / "home"
    home.mkdir()
    config = home / ".claude.json"
    link(config, w.tmp / "dotfiles" / "not-there.json")
    ran = w.rune("install", "claude", "--force", cwd=home, env=_install_env(home), ok=(2,))
    expect(failures, "does not exist" in ran.stderr, "no 'does not exist' line")
    expect(failures, not (home / ".claude").exists(), "~/.claude was created")
    expect(failures, config.is_symlink() and not config.exists(), "the dangling link changed")
    return w.row(failures, "exit 2 'does not exist'; nothing written, no ~/.claude")
