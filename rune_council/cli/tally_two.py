"""A long ``rune council tally`` on two cores: a forked copy of this process reads, counts
and prints the second half of the transcript while this one does the first half.

Fork shares the transcript's text with the copy (neither writes to it; each makes its own
part's lines), and nothing is pickled but what the halves tell each other: who ranks in the
second half, the context it is counted against (the proposals), its whole-number counts
and its points in line order, the merged counts back, and who in it dissents
(``deliberation.halves``). The copy prints its rankers' lines into a spool, through the
same ``echo``/``echo_json`` as the one-process path, and this process copies the spool out
between its own rankers and the end of the report: the output is byte for byte the
one-process output. (A ranker's line is plain ASCII, which the printing filters leave as it
is wherever a write starts; the writes that hold the report's head and end start where the
one-process path's do.) Whenever the halves cannot be put together as the whole transcript
would be counted, nothing has been printed yet and the caller tallies it in one process; a
copy that fails after that has its half counted and printed here instead.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import shutil
import signal
import sys
import tempfile
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from itertools import islice
from typing import IO, TYPE_CHECKING, Any

from .app import echo, echo_json

if TYPE_CHECKING:
    from ..core.contract import TallyReport
    from ..deliberation.halves import Context, SecondCount
    from ..deliberation.tally import TallyParts, _Borda

# Below this many lines a tally prints in a fraction of a second and a second process
# would not pay for its start.
TWO_CORES_FROM = 20_000
LINES_PER_ECHO = 1000  # text lines per write, as the one-process path writes them
# The copy's share of the lines: this process also puts the halves together and prints the
# report's head and end.
SECOND_SHARE = 0.47


class _Fallback(Exception):
    """The halves cannot be put together: tally the transcript in one process."""


def echo_lines(lines: Iterable[str], start: int = 0) -> None:
    """``lines`` printed LINES_PER_ECHO to a write, the writes ending where the
    one-process path's end when the first of them is the report's line ``start``."""
    chunk: list[str] = []
    at = start
    for line in lines:
        chunk.append(line)
        at += 1
        if at % LINES_PER_ECHO == 0:
            echo("\n".join(chunk))
            chunk.clear()
    if chunk:
        echo("\n".join(chunk))


_PIECE = 1 << 20  # characters of the text written to a file at a time

# What ``str.splitlines`` ends a line at besides "\n" and "\r\n": a transcript holding one
# is not split, its lines' numbers are counted by "\n" only.
_OTHER_BREAKS = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


@dataclass(slots=True)
class _Split:
    """The transcript (``held``, the caller's one reference to its text), where its second
    part starts, that part's first line number and the phase the first part leaves (what
    ``parse_lines`` needs to read the part alone)."""

    held: list[str]
    at: int
    line: int
    phase: str | None
    kept: IO[bytes] | None = None  # the second part, once the text is let go (``keep_second``)

    def first(self) -> list[str]:
        return self.held[0][: self.at].splitlines()

    def second(self) -> list[str]:
        if self.kept is not None:
            self.kept.seek(0)
            return self.kept.read().decode("utf-8", "surrogatepass").splitlines()
        return self.held[0][self.at :].splitlines()

    def drop(self) -> None:
        """Let the text go: its 12 MB (at 100,000 lines) are one allocation, whose pages go
        back to the system once neither process holds it."""
        self.held.clear()

    def keep_second(self) -> None:
        """Let the text go but its second part, kept in a temporary file (a few MB that
        are not this process's memory), in case the copy fails to print it. Written a
        piece at a time: a copy of the part would be held beside the text. Where no such
        file can be written, the part is kept in memory."""
        text = self.held[0]
        try:
            self.kept = tempfile.TemporaryFile()  # noqa: SIM115 (closed by ``close``)
            for start in range(self.at, len(text), _PIECE):
                self.kept.write(text[start : start + _PIECE].encode("utf-8", "surrogatepass"))
            self.kept.flush()
        except OSError:
            self.close()
            self.held[0] = text[self.at :]
            self.at = 0
            return
        del text
        self.drop()

    def close(self) -> None:
        if self.kept is not None:
            with contextlib.suppress(OSError):
                self.kept.close()
            self.kept = None


def _split(held: list[str]) -> _Split | None:
    from ..deliberation.dsl import phase_after

    text = held[0]
    at = text.find("\n", len(text) - int(len(text) * SECOND_SHARE)) + 1
    if at <= 0 or at == len(text):
        return None
    # (Most transcripts hold no carriage return: one search, not two counts.)
    if text.find("\r", 0, at) >= 0 and text.count("\r", 0, at) != text.count("\r\n", 0, at):
        return None
    if any(text.find(other, 0, at) >= 0 for other in _OTHER_BREAKS):
        return None
    return _Split(held, at, text.count("\n", 0, at) + 1, phase_after(text, at))


def tallied_on_two_cores(held: list[str], source: str, as_json: bool) -> bool | None:
    """Tally and print the transcript whose text is ``held[0]`` on two cores; the report's
    ``valid``, or None when nothing was printed and the caller is to tally it in one
    process (the text is then in ``held`` still). ``held`` is to be the only reference to
    the text: each process lets it go once it needs it no more."""
    text = held[0]
    if not hasattr(os, "fork") or not _stdout_is_fd_1() or text.count("\n") < TWO_CORES_FROM:
        return None
    del text  # (from here on, ``held`` is the one reference)
    if hasattr(os, "sched_getaffinity") and len(os.sched_getaffinity(0)) < 2:
        return None  # one core to run on: a copy would only take turns with this process
    # Split before the fork, each process making only its own part's lines: what the two
    # share is the text, which neither writes to.
    split = _split(held)
    if split is None:
        return None
    to_parent, from_child = _pipe()
    to_child, from_parent = _pipe()
    with tempfile.TemporaryFile() as spool:
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            pid = os.fork()
        except OSError:
            return None
        if pid == 0:
            code = 1
            try:
                from_child.close()
                to_child.close()
                _second_half(split, as_json, from_parent, to_parent, spool)
                code = 0
            finally:
                os._exit(code)
        to_parent.close()
        from_parent.close()
        copy = _Copy(pid, from_child, to_child, spool)
        try:
            return _first_half(split, source, as_json, copy)
        except _Fallback:
            return None
        finally:
            copy.end()
            split.close()


class _Copy:
    """The forked copy, seen from this process: its pipes, its spool, and whether it has
    been waited for (its process id is never signalled after that)."""

    def __init__(self, pid: int, source: IO[bytes], out: IO[bytes], spool: IO[bytes]) -> None:
        self.pid = pid
        self.source = source
        self.out = out
        self.spool = spool

    def send(self, message: object) -> None:
        with contextlib.suppress(OSError):  # it has gone; its next answer is None
            _send(self.out, message)

    def receive(self) -> Any:
        return _receive(self.source)

    def finished(self) -> bool:
        """Whether the copy printed its half into the spool (it has then exited)."""
        if not self.pid:
            return False
        _, status = os.waitpid(self.pid, 0)
        self.pid = 0
        return os.waitstatus_to_exitcode(status) == 0

    def end(self) -> None:
        self.source.close()
        with contextlib.suppress(OSError):
            self.out.close()
        if self.pid:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
            self.pid = 0


def _first_half(split: _Split, source: str, as_json: bool, copy: _Copy) -> bool:
    from ..deliberation import halves
    from ..deliberation.dsl import parse_lines

    transcript, end_phase = parse_lines(split.first())
    # (The copy read its half in ``split.phase``: the phase the first half really leaves.)
    context = halves.first_context(transcript) if end_phase == split.phase else None
    copy.send(context)
    if context is None:
        raise _Fallback
    theirs = copy.receive()
    if theirs is None or not halves.apart(transcript, theirs):
        raise _Fallback  # a ranker of the first half ranks again in the second
    first = halves.count_first(transcript, context)
    del transcript
    if first is None:
        raise _Fallback
    second = _receive_count(copy.source)
    if second is None:
        raise _Fallback
    try:
        merged = halves.merge(first, second)  # (which reads the points from the pipe)
    except EOFError:
        raise _Fallback from None  # the copy went before it had sent them all
    copy.send(None if merged is None else merged.centred)
    if merged is None:
        raise _Fallback
    rounded = halves.rounded_means(first.borda, merged.centred)
    # Marked while the copy marks its own: if everyone is below zero, these records are
    # not printed (the one-process tally is).
    dissenters = halves.mark(first.borda, rounded, merged.counting)
    said = copy.receive()
    if said is None or (halves.all_below(rounded) and said[0]):
        raise _Fallback  # everyone below zero: the one-process tally says why
    del rounded  # (kept on the counted records)
    dissenters += said[1]
    report = halves.whole_report(first, merged, second, dissenters)
    parts = halves.parts_of(report, first.borda, context.active)
    # The first write holds the report's head and the first rankers; the copy's rankers
    # come after it, so the first half has more rankers than that write holds.
    if len(parts.counted) <= LINES_PER_ECHO or _head(report, source, parts) >= LINES_PER_ECHO:
        raise _Fallback
    zero = halves.zero_table(first.borda)
    copy.send((True, zero))  # the copy prints its half now
    # Nothing is left to tally in one process: of the text, only what the copy counts is
    # kept, in case it fails to print it. (The copy has let its share of the text go, so
    # the text's pages go back to the system.)
    split.keep_second()

    def second_half() -> None:
        """The copy's rankers from its spool, or counted and printed here if it failed."""
        if copy.finished():
            _copy(copy.spool)
            return
        counted = _count_second(split, context)
        if counted is None:  # (the copy counted the same lines)
            raise RuntimeError("the second half could not be counted again")
        borda = counted[1]
        halves.mark(borda, halves.rounded_means(borda, merged.centred), merged.counting)
        halves.share_zero(borda, zero)
        print_counted(halves.parts_of(report, borda, context.active), as_json)

    _print_around(parts, source, as_json, second.counted, second_half)
    return report.valid


def _print_around(
    parts: TallyParts, source: str, as_json: bool, others: int, second_half: Callable[[], None]
) -> None:
    """The report, its first half's rankers from ``parts`` and the ``others`` after them
    printed by ``second_half`` where they go."""
    from ..render import tally_json_chunks, tally_lines

    report = parts.report
    if as_json:
        chunks = tally_json_chunks(report, parts)
        held = next(chunks)
        for data in chunks:
            echo_json(held, nl=False)
            held = data
        # The last chunk: this half's last rankers, the rankers' closing, the report's end
        # (the head, with its own closing brackets, was in the first chunk).
        cut = held.find(b"\n  ],\n")
        if cut:
            echo_json(held[:cut], nl=False)
        second_half()
        echo_json(held[cut:], nl=False)
        echo()
        return
    head = _head(report, source, parts)
    text = tally_lines(report, source, parts)
    mine = head + len(parts.counted)
    echo_lines(islice(text, mine))
    second_half()
    echo_lines(text, mine + others)


def print_counted(parts: TallyParts, as_json: bool) -> None:
    """Counted ballots' lines (or JSON items, each after a comma) as the report prints
    them after other rankers'."""
    from ..render import counted_json, counted_lines

    if as_json:
        group: list[bytes] = []
        for item in counted_json(parts):
            group += (b",", item)
            if len(group) == 2 * LINES_PER_ECHO:
                echo_json(b"".join(group), nl=False)
                group.clear()
        if group:
            echo_json(b"".join(group), nl=False)
    else:
        echo_lines(counted_lines(parts))


def _head(report: TallyReport, source: str, parts: TallyParts) -> int:
    """How many lines the report prints before its first ranker's: where two reports of one
    ranker each first differ."""
    from ..render import tally_lines

    one = tally_lines(report, source, _view(parts, parts.counted[:1]))
    other = tally_lines(report, source, _view(parts, parts.counted[1:2]))
    return next(i for i, (a, b) in enumerate(zip(one, other, strict=False)) if a != b)


def _view(parts: TallyParts, counted: list[Any]) -> TallyParts:
    from ..deliberation.tally import TallyParts

    return TallyParts(parts.report, counted, parts.active, parts.tables)


def _count_second(split: _Split, context: Context) -> tuple[SecondCount, _Borda] | None:
    """The second part read and counted against ``context``."""
    from ..deliberation import halves
    from ..deliberation.dsl import parse_lines

    transcript, _ = parse_lines(split.second(), split.line, split.phase)
    return halves.count_second(transcript, context)


def _second_half(
    split: _Split,
    as_json: bool,
    from_parent: IO[bytes],
    to_parent: IO[bytes],
    spool: IO[bytes],
) -> None:
    """The copy's work: read, count and print the lines from ``split`` on."""
    from ..deliberation import halves
    from ..deliberation.dsl import parse_lines

    lines = split.second()
    split.drop()  # this process's share of the text: the lines hold what it needs
    transcript, _ = parse_lines(lines, split.line, split.phase)
    del lines
    _send(to_parent, halves.rankers(transcript))
    context = _receive(from_parent)
    if context is None:
        return
    counted = halves.count_second(transcript, context)
    del transcript
    if counted is None:
        _send(to_parent, None)
        return
    _send_count(to_parent, counted[0])
    borda = counted[1]
    del counted  # (its points, sent)
    centred = _receive(from_parent)
    if centred is None:
        return
    rounded = halves.rounded_means(borda, centred)
    # Marked as if someone stands apart; the first half says whether everyone is below.
    dissenters = halves.mark(borda, rounded, True)
    _send(to_parent, (halves.all_below(rounded), dissenters))
    del rounded, dissenters
    go = _receive(from_parent)
    if not go:
        return
    halves.share_zero(borda, go[1])
    os.dup2(spool.fileno(), 1)
    print_counted(halves.parts_of(_placeholder(), borda, context.active), as_json)
    sys.stdout.flush()


def _placeholder() -> TallyReport:
    from ..core.contract import TallyReport

    return TallyReport.model_construct()


def _pipe() -> tuple[IO[bytes], IO[bytes]]:
    read, write = os.pipe()
    return os.fdopen(write, "wb"), os.fdopen(read, "rb")


def _send(out: IO[bytes], message: object) -> None:
    pickle.dump(message, out, protocol=pickle.HIGHEST_PROTOCOL)
    out.flush()


def _send_count(out: IO[bytes], count: SecondCount) -> None:
    """The second half's count, its points written as the arrays' own bytes: pickling them
    would hold a copy of some 11 MB on each side."""
    points = list(count.points)
    _send(out, (replace(count, points=[]), [len(column) for column in points]))
    for column in points:
        column.tofile(out)
    out.flush()


def _receive_count(source: IO[bytes]) -> SecondCount | None:
    """The second half's count; its points are read from ``source`` as they are added up,
    one column at a time (EOFError if the copy has gone before)."""
    got = _receive(source)
    if got is None:
        return None
    count, lengths = got
    count.points = _columns(source, lengths)
    return count  # type: ignore[no-any-return]


def _columns(source: IO[bytes], lengths: list[int]) -> Iterator[array[float]]:
    for length in lengths:
        column = array("d")
        column.fromfile(source, length)
        yield column


def _receive(source: IO[bytes]) -> Any:
    """The other process's message; None when it has gone (it says nothing more)."""
    try:
        return pickle.load(source)
    except (EOFError, pickle.UnpicklingError):
        return None


def _copy(spool: IO[bytes]) -> None:
    """The spool onto stdout: by the kernel where it can (``sendfile``), without reading
    20 to 45 MB through this process."""
    sys.stdout.flush()
    out = sys.stdout.buffer
    out.flush()
    size = os.fstat(spool.fileno()).st_size
    sent = 0
    if hasattr(os, "sendfile"):
        with contextlib.suppress(OSError):
            while sent < size:
                step = os.sendfile(out.fileno(), spool.fileno(), sent, size - sent)
                if not step:
                    break
                sent += step
    spool.seek(sent)
    shutil.copyfileobj(spool, out, 1 << 20)
    out.flush()


def _stdout_is_fd_1() -> bool:
    """Whether printing goes to this process's file descriptor 1 (the copy writes there)."""
    try:
        return sys.stdout.fileno() == 1 and hasattr(sys.stdout, "buffer")
    except (AttributeError, OSError, ValueError):
        return False
