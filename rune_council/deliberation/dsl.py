"""The council DSL (grammar v1): typed moves, one per line, parsed without a model.

    @phase propose|rank|critique|revise|vote|synth
    [speaker] VERB [MODALITY] [-> target] [args] key=value ... ["note"]

Verbs: PROPOSE CLAIM REQUIRE RANK CRITIQUE REVISE VOTE ABSTAIN SYNTH. Modalities are RFC 2119:
MUST, MUST-NOT, SHOULD, SHOULD-NOT, MAY. Fields: ``ev=`` (comma-separated references),
``conf=`` (0..1), ``note="..."`` (a trailing quoted string is the note too) and
``open=[a, b]``. ``#`` followed by a space starts a comment; ``#slug`` is a label.
``@own <speaker> <label>`` records that a proposal is the speaker's own answer, kept from its
ballot by design (the rank stage): concordance then treats it as unseen, not as last.

Proposals carry anonymised labels only (``A``-``Z``, ``p1``, ``#slug``), so a ballot or a
critique can never name a model. A line that breaks a rule is dropped with its reason and
parsing goes on; only a REQUIRE that cites nothing is escalated, because a policy nobody can
trace must not be silently applied or silently ignored.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

VERBS = (
    "PROPOSE",
    "CLAIM",
    "REQUIRE",
    "RANK",
    "CRITIQUE",
    "REVISE",
    "VOTE",
    "ABSTAIN",
    "SYNTH",
)
_VERB_SET = frozenset(VERBS)
MODALITIES = ("MUST", "MUST-NOT", "SHOULD", "SHOULD-NOT", "MAY")
PHASES = ("propose", "rank", "critique", "revise", "vote", "synth")
FIELDS = ("ev", "conf", "note", "open")
BLOCKING = ("MUST", "MUST-NOT")

# Verbs that only make sense in one phase; the rest may appear wherever a phase allows talk.
_PHASE_OF = {"RANK": ("rank",), "VOTE": ("vote",), "ABSTAIN": ("vote", "rank"), "SYNTH": ("synth",)}

LABEL_RE = re.compile(r"^(?:[A-Z]|p[1-9][0-9]*|#[a-z0-9][a-z0-9-]*)$")
_ITEM_RE = re.compile(r"^[1-9][0-9]*$")
_SPEAKER_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_KEY_RE = re.compile(r"^([a-z_]+)=(.*)$", re.DOTALL)
MAX_LINE = 4000


class LineError(ValueError):
    """Why one line cannot be used."""


@dataclass(frozen=True, slots=True)
class Move:
    line: int
    text: str
    verb: str
    speaker: str | None = None
    phase: str | None = None
    modality: str | None = None
    target: str | None = None
    args: tuple[str, ...] = ()
    ev: tuple[str, ...] = ()
    conf: float | None = None
    note: str | None = None
    open: tuple[str, ...] | None = None
    ballot: tuple[tuple[str, ...], ...] = ()
    choice: str | None = None  # VOTE yes | no


@dataclass(frozen=True)
class Dropped:
    line: int
    text: str
    reason: str


@dataclass
class Transcript:
    moves: list[Move] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)
    errors: list[Dropped] = field(default_factory=list)
    own: dict[str, set[str]] = field(default_factory=dict)


# --------------------------------------------------------------------------- tokens


@dataclass(frozen=True)
class _Tok:
    value: str
    quoted: bool  # a standalone "quoted string"


def _read_quoted(line: str, i: int) -> tuple[str, int]:
    """``line[i]`` is the opening quote; returns (content, index after the closing quote)."""
    out: list[str] = []
    i += 1
    while i < len(line):
        ch = line[i]
        if ch == "\\" and i + 1 < len(line) and line[i + 1] in '"\\':
            out.append(line[i + 1])
            i += 2
            continue
        if ch == '"':
            return "".join(out), i + 1
        out.append(ch)
        i += 1
    raise LineError("unterminated quoted string")


def _read_list(line: str, i: int) -> tuple[str, int]:
    """``line[i]`` is '['; returns the raw text up to and including the matching ']'."""
    start = i
    i += 1
    while i < len(line):
        ch = line[i]
        if ch == '"':
            _, i = _read_quoted(line, i)
            continue
        if ch == "]":
            return line[start : i + 1], i + 1
        i += 1
    raise LineError("unterminated [list]")


def tokenize(line: str) -> list[_Tok]:
    tokens: list[_Tok] = []
    i, n = 0, len(line)
    while i < n:
        ch = line[i]
        if ch.isspace():
            i += 1
            continue
        if ch == "#" and (i + 1 == n or line[i + 1].isspace() or line[i + 1] == "#"):
            break  # a comment runs to the end of the line
        if ch == '"':
            text, i = _read_quoted(line, i)
            tokens.append(_Tok(text, True))
            continue
        start = i
        parts: list[str] = []
        while i < n and not line[i].isspace():
            if line[i] == '"':
                parts.append(line[start:i])
                text, i = _read_quoted(line, i)
                # Re-quote so the field parser can tell "a,b" from a,b.
                parts.append('"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"')
                start = i
                continue
            if line[i] == "[" and i > 0 and line[i - 1] == "=":
                parts.append(line[start:i])
                raw, i = _read_list(line, i)
                parts.append(raw)
                start = i
                continue
            i += 1
        parts.append(line[start:i])
        tokens.append(_Tok("".join(parts), False))
    return tokens


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == '"' and value[-1] == '"':
        text, end = _read_quoted(value, 0)
        if end != len(value):
            raise LineError(f"stray text after a quoted value: {value!r}")
        return text
    return value


def parse_list(raw: str) -> tuple[str, ...]:
    """``[a, "b c", d]`` -> ("a", "b c", "d"); ``[]`` -> ()."""
    if not (raw.startswith("[") and raw.endswith("]")):
        raise LineError(f"expected a [list], got {raw!r}")
    body = raw[1:-1]
    items: list[str] = []
    current: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == '"':
            text, i = _read_quoted(body, i)
            current.append(text)
            continue
        if ch == ",":
            items.append("".join(current).strip())
            current = []
            i += 1
            continue
        current.append(ch)
        i += 1
    last = "".join(current).strip()
    if last or items:
        items.append(last)
    if any(not item for item in items):
        raise LineError("empty entry in a [list]")
    return tuple(items)


def parse_ballot(raw: str) -> tuple[tuple[str, ...], ...]:
    """``p2>p1=p3`` -> (("p2",), ("p1", "p3")): '>' separates levels, '=' ties."""
    levels: list[tuple[str, ...]] = []
    seen: set[str] = set()
    for level in raw.split(">"):
        labels = tuple(part.strip() for part in level.split("="))
        for label in labels:
            if not label:
                raise LineError(f"empty place in ballot {raw!r}")
            if not LABEL_RE.match(label):
                raise LineError(
                    f"RANK names {label!r}: only anonymised labels (A-Z, p1, #slug) may be ranked"
                )
            if label in seen:
                raise LineError(f"RANK names {label} twice")
            seen.add(label)
        levels.append(labels)
    return tuple(levels)


def ballot_text(levels: Sequence[Sequence[str]]) -> str:
    return ">".join("=".join(level) for level in levels)


# --------------------------------------------------------------------------- moves


def _check_label(verb: str, label: str) -> str:
    if not LABEL_RE.match(label):
        raise LineError(
            f"{verb} names {label!r}: proposals are named by anonymised labels (A-Z, p1, #slug)"
        )
    return label


def _conf(value: str) -> float:
    try:
        conf = float(value)
    except ValueError:
        raise LineError(f"conf={value} is not a number") from None
    if not math.isfinite(conf) or not 0.0 <= conf <= 1.0:
        raise LineError(f"conf={value} is outside 0..1")
    return conf


def parse_move(line_no: int, text: str, phase: str | None) -> Move:
    tokens = tokenize(text)
    if not tokens:
        raise LineError("empty move")
    speaker: str | None = None
    if tokens[0].quoted or tokens[0].value not in VERBS:
        head = tokens[0].value.rstrip(":")
        if len(tokens) < 2 or tokens[1].quoted or tokens[1].value not in VERBS:
            raise LineError(f"no verb: a move starts with [speaker] and one of {', '.join(VERBS)}")
        if tokens[0].quoted or not _SPEAKER_RE.match(head):
            raise LineError(f"{tokens[0].value!r} is not a usable speaker name")
        speaker = head
        tokens = tokens[1:]
    verb = tokens[0].value
    rest = tokens[1:]

    allowed_phases = _PHASE_OF.get(verb)
    if phase is not None and allowed_phases is not None and phase not in allowed_phases:
        raise LineError(f"{verb} does not belong in the {phase} phase")

    modality: str | None = None
    if rest and not rest[0].quoted and rest[0].value in MODALITIES:
        modality = rest[0].value
        rest = rest[1:]

    target: str | None = None
    positional: list[str] = []
    fields: dict[str, str] = {}
    notes: list[str] = []
    i = 0
    while i < len(rest):
        tok = rest[i]
        if tok.quoted:
            notes.append(tok.value)
        elif tok.value == "->" or tok.value.startswith("->"):
            if target is not None:
                raise LineError("more than one -> target")
            value = tok.value[2:]
            if not value:
                i += 1
                if i >= len(rest) or rest[i].quoted:
                    raise LineError("-> without a target")
                value = rest[i].value
            target = value
        elif (m := _KEY_RE.match(tok.value)) is not None:
            key, value = m.group(1), m.group(2)
            if key not in FIELDS:
                raise LineError(f"unknown field {key}= (known: {', '.join(FIELDS)})")
            if key in fields:
                raise LineError(f"{key}= given twice")
            fields[key] = value
        elif tok.value in MODALITIES:
            raise LineError(f"modality {tok.value} must come right after the verb")
        else:
            positional.append(tok.value)
        i += 1

    if len(notes) > 1:
        raise LineError("more than one quoted note")
    note: str | None = notes[0] if notes else None
    if "note" in fields:
        if note is not None:
            raise LineError("both note= and a quoted note")
        note = _unquote(fields["note"])
    ev: tuple[str, ...] = ()
    if "ev" in fields:
        raw = fields["ev"]
        refs = parse_list(raw) if raw.startswith("[") else tuple(_unquote(raw).split(","))
        ev = tuple(r.strip() for r in refs if r.strip())
        if not ev:
            raise LineError("ev= names no reference")
    conf = _conf(_unquote(fields["conf"])) if "conf" in fields else None
    open_items = parse_list(fields["open"]) if "open" in fields else None
    if open_items is not None and verb != "SYNTH":
        raise LineError("open=[...] belongs to SYNTH")

    move = Move(
        line=line_no,
        text=text,
        verb=verb,
        speaker=speaker,
        phase=phase,
        modality=modality,
        target=target,
        ev=ev,
        conf=conf,
        note=note,
        open=open_items,
    )
    return _check_verb(move, positional)


def _no_modality(move: Move) -> None:
    if move.modality is not None:
        raise LineError(f"{move.verb} takes no modality")


def _no_args(move: Move, positional: list[str]) -> None:
    if positional:
        raise LineError(f"unexpected argument {positional[0]!r} for {move.verb}")


def _check_verb(move: Move, positional: list[str]) -> Move:
    verb = move.verb
    if verb == "PROPOSE":
        _no_modality(move)
        label = move.target
        if label is None:
            if not positional:
                raise LineError('PROPOSE needs a label (PROPOSE p1 "text")')
            label = positional.pop(0)
        _no_args(move, positional)
        return replace(move, target=_check_label(verb, label))
    if verb == "CLAIM":
        _no_args(move, positional)
        if move.target is not None:
            _check_label(verb, move.target)
        if not move.ev:
            raise LineError("CLAIM without ev=: an uncited claim is not counted")
        return move
    if verb == "REQUIRE":
        _no_args(move, positional)
        if move.modality == "MAY":
            raise LineError("REQUIRE MAY is rejected: a permission is not a requirement")
        if move.modality is None:
            raise LineError("REQUIRE needs MUST, MUST-NOT, SHOULD or SHOULD-NOT")
        if move.target is not None:
            _check_label(verb, move.target)
        return move  # a missing ev= is escalated by the parser, not dropped here
    if verb == "RANK":
        _no_modality(move)
        if move.target is not None:
            raise LineError("RANK takes a ballot, not a -> target")
        if len(positional) != 1:
            raise LineError("RANK takes exactly one ballot such as p2>p1=p3")
        return replace(move, ballot=parse_ballot(positional[0]), args=tuple(positional))
    if verb in ("CRITIQUE", "REVISE"):
        if verb == "REVISE":
            _no_modality(move)
        _no_args(move, positional)
        if move.target is None:
            raise LineError(f"{verb} needs a -> target label")
        _check_label(verb, move.target)
        return move
    if verb == "VOTE":
        _no_modality(move)
        _vote_target(move)
        if len(positional) != 1 or positional[0].lower() not in ("yes", "no"):
            raise LineError("VOTE needs -> target and yes or no")
        return replace(move, choice=positional[0].lower())
    if verb == "ABSTAIN":
        _no_modality(move)
        _no_args(move, positional)
        _vote_target(move)
        return move
    # SYNTH
    _no_modality(move)
    _no_args(move, positional)
    if move.target is not None:
        for label in move.target.split(","):
            _check_label(verb, label)
    return move


def _vote_target(move: Move) -> None:
    if move.target is None:
        raise LineError(f"{move.verb} needs a -> target (an item number or a label)")
    if not (_ITEM_RE.match(move.target) or LABEL_RE.match(move.target)):
        raise LineError(f"{move.verb} target {move.target!r} is neither an item number nor a label")


_LABEL_FULL = re.compile(r"[A-Z]|p[1-9][0-9]*|#[a-z0-9][a-z0-9-]*")
# The shape nearly every ballot line has: [speaker[:]] RANK ballot [conf=number], nothing else.
# The ballot's places are checked once per distinct level text (``_level``), not per line.
_PLAIN_RANK = re.compile(
    r"(?:([A-Za-z0-9][A-Za-z0-9._-]{0,63}):?[ \t]+)?RANK[ \t]+([^ \t]+)"
    r"(?:[ \t]+conf=([01](?:\.[0-9]+)?))?"
)


def _level(part: str) -> tuple[str, ...] | None:
    """A level text's labels as ``parse_ballot`` reads them, None where it would refuse them
    (an empty place, a label that is not one, a label tied with itself)."""
    labels = part.split("=")
    if not all(map(_LABEL_FULL.fullmatch, labels)) or len(set(labels)) != len(labels):
        return None
    return tuple(map(sys.intern, labels))


def _plain_rank(
    line_no: int, text: str, phase: str | None, levels: dict[str, tuple[str, ...]]
) -> Move | None:
    """The move ``parse_move`` would make of a plain RANK line, without tokenizing it; None
    for any other line (``parse_move`` then reads it, errors and all). ``levels`` shares one
    tuple per level text across a transcript, so a long one holds each label once."""
    match = _PLAIN_RANK.fullmatch(text)
    if match is None or phase not in (None, "rank"):
        return None
    speaker, raw, conf_text = match.groups()
    if speaker in _VERB_SET:
        return None  # "RANK RANK ..." is read by the full parser (and refused there)
    parts = raw.split(">")
    # One lookup per level, in one pass of builtins: a tally of 100,000 ballots reads each
    # level text from the shared table, and only a level not seen before is split.
    try:
        ballot = tuple(map(levels.__getitem__, parts))
    except KeyError:
        for part in parts:
            if part not in levels:
                level = _level(part)
                if level is None:
                    return None
                levels[part] = level
        ballot = tuple(map(levels.__getitem__, parts))
    conf = None
    if conf_text is not None:
        conf = float(conf_text)
        if conf > 1.0:
            return None
    # A label named twice: the full parser says so. A level holds no label twice (``_level``),
    # so the ballot's labels, gathered from its shared level tuples in one C pass, number
    # its places and ties unless one is named in two levels.
    if "=" in raw:
        if len(set().union(*ballot)) != len(parts) + raw.count("="):
            return None
    elif len(set(parts)) != len(parts):
        return None
    return Move(
        line=line_no,
        text=text,
        verb="RANK",
        speaker=speaker,
        phase=phase,
        args=(raw,),
        conf=conf,
        ballot=ballot,
    )


def _is_fence(stripped: str) -> bool:
    return stripped.startswith("```")


def parse(text: str) -> Transcript:
    """Every line becomes a move, a dropped line with its reason, or (REQUIRE) an error."""
    return parse_lines(text.splitlines())[0]


def parse_lines(
    lines: Sequence[str], first: int = 1, phase: str | None = None
) -> tuple[Transcript, str | None]:
    """``parse`` of a transcript's lines from line number ``first`` on, read in ``phase``
    (the phase the lines before them left), and the phase the lines leave: a long
    transcript can be read in parts, each part's moves those of the whole."""
    out = Transcript()
    levels: dict[str, tuple[str, ...]] = {}
    moves = out.moves
    for line_no, raw in enumerate(lines, start=first):
        # A plain RANK line, the bulk of a long transcript, has nothing to strip, skip or
        # drop: its move is made at once (the same move the path below would make).
        if len(raw) <= MAX_LINE:
            quick = _plain_rank(line_no, raw, phase, levels)
            if quick is not None:
                moves.append(quick)
                continue
        stripped = raw.strip()
        if not stripped or _is_fence(stripped):
            continue
        if stripped.startswith("#") and (len(stripped) == 1 or stripped[1] in " \t#!"):
            continue
        shown = stripped[:MAX_LINE]
        if len(stripped) > MAX_LINE:
            out.dropped.append(Dropped(line_no, shown, f"line longer than {MAX_LINE} characters"))
            continue
        if stripped.startswith("@"):
            words = stripped.split()
            if len(words) == 2 and words[0] == "@phase" and words[1] in PHASES:
                phase = words[1]
            elif (
                len(words) == 3
                and words[0] == "@own"
                and _SPEAKER_RE.match(words[1])
                and LABEL_RE.match(words[2])
            ):
                out.own.setdefault(words[1], set()).add(words[2])
            else:
                out.dropped.append(
                    Dropped(
                        line_no,
                        shown,
                        f"unknown directive (@phase {'|'.join(PHASES)} or @own SPEAKER LABEL)",
                    )
                )
            continue
        try:
            # A plain line was read above; one with blanks around it is read here.
            quick = _plain_rank(line_no, stripped, phase, levels) if stripped != raw else None
            move = quick or parse_move(line_no, stripped, phase)
        except LineError as exc:
            out.dropped.append(Dropped(line_no, shown, str(exc)))
            continue
        if move.verb == "REQUIRE" and not move.ev:
            out.errors.append(
                Dropped(
                    line_no,
                    shown,
                    "REQUIRE without ev=: a policy with no source is escalated, not applied",
                )
            )
            continue
        out.moves.append(move)
    return out, phase


def phase_after(text: str, end: int) -> str | None:
    """The phase in effect after ``text[:end]`` (which ends with a newline), read without
    parsing the moves: only a line that names ``@phase`` can change it, and ``parse_lines``
    reads those lines as it reads them in place (a move between them changes no phase)."""
    named: list[str] = []
    found = text.find("@phase", 0, end)
    while found >= 0:
        stop = text.find("\n", found)
        named.append(text[text.rfind("\n", 0, found) + 1 : stop])
        found = text.find("@phase", stop, end)
    return parse_lines(named)[1]


def quote(text: str) -> str:
    """``text`` as a DSL quoted string (one line)."""
    flat = " ".join(text.split())
    return '"' + flat.replace("\\", "\\\\").replace('"', '\\"') + '"'
