"""The exact shapes of the values this program writes and later acts on.

A run file can arrive with a repository, so whatever it says is a claim, not a fact. Before a
value from one becomes a process to signal, a directory to remove or a path, it must have the
shape this program itself writes: a marker is the hex it generates, a voice marker is that
hex and a serial number, a scratch directory is named after a voice marker and nothing else.
The writers build their values here too, so the two sides cannot drift apart.

Run ids have their guard where they become file names (``paths.RuneDir.run_file``); the id
written inside a run file is never used as a path, since readers go by the file's name.
"""

from __future__ import annotations

import math
import re

__all__ = [
    "MAX_RECORDED_PROCESSES",
    "RUN_MARKER_BYTES",
    "SCRATCH_PREFIX",
    "is_pid",
    "is_run_marker",
    "is_scratch_dir_name",
    "is_start_time",
    "is_voice_marker",
    "is_voice_pid",
    "scratch_prefix",
    "voice_marker",
]

# A run marker is ``os.urandom(RUN_MARKER_BYTES).hex()``: unguessable, so a process carrying
# it in its environment can only have inherited it from the council that made it.
RUN_MARKER_BYTES = 8
_HEX = f"[0-9a-f]{{{2 * RUN_MARKER_BYTES}}}"
_RUN_MARKER = re.compile(_HEX)
# ``<run>.<n>``: the run marker, then the serial of the voice process within this program.
_VOICE_MARKER = re.compile(rf"({_HEX})\.([1-9][0-9]{{0,11}})")
# Every directory a voice process is given (its working directory, and the one holding its
# prompt and schema files): ``tempfile.mkdtemp(prefix=scratch_prefix(marker))``, whose
# random tail is eight characters of ``tempfile``'s own alphabet.
SCRATCH_PREFIX = "rune-council-"
_SCRATCH_TAIL = re.compile(r"-[a-z0-9_]{8}")
# Linux never hands out a pid above 2**22; other systems stay far below 2**31. Pid 0 and
# negative ones mean whole process groups to ``kill``; pid 1 can be a council (the first
# process of a container) but never one of its voices.
_MAX_PID = 2**31 - 1
# More voice processes than any council keeps alive at once; a longer list is not ours.
MAX_RECORDED_PROCESSES = 256


def is_run_marker(value: object) -> bool:
    return isinstance(value, str) and _RUN_MARKER.fullmatch(value) is not None


def voice_marker(run: str, serial: int) -> str:
    """The marker a voice process of run ``run`` carries in ``RUNE_COUNCIL_VOICE``."""
    marker = f"{run}.{serial}"
    if not is_voice_marker(marker):
        raise ValueError(f"not a voice marker: {marker!r}")
    return marker


def is_voice_marker(value: object, run: str | None = None) -> bool:
    """``value`` is ``<run>.<n>`` (of this ``run``, when one is given)."""
    if not isinstance(value, str):
        return False
    match = _VOICE_MARKER.fullmatch(value)
    return match is not None and (run is None or match.group(1) == run)


def scratch_prefix(marker: str) -> str:
    """The name each directory a voice is given starts with (``mkdtemp`` adds the rest)."""
    if not is_voice_marker(marker):
        raise ValueError(f"not a voice marker: {marker!r}")
    return f"{SCRATCH_PREFIX}{marker}-"


def is_scratch_dir_name(name: str, run: str) -> bool:
    """``name`` is a directory one of run ``run``'s voices was given, by its shape alone."""
    if not is_run_marker(run) or not name.startswith(SCRATCH_PREFIX):
        return False
    rest = name[len(SCRATCH_PREFIX) :]
    marker, dash, tail = rest.rpartition("-")
    return (
        bool(dash)
        and is_voice_marker(marker, run)
        and _SCRATCH_TAIL.fullmatch(dash + tail) is not None
    )


def is_pid(value: object) -> bool:
    """A pid that names one process (never a process group, never "every process")."""
    return type(value) is int and 0 < value <= _MAX_PID


def is_voice_pid(value: object) -> bool:
    """A pid a voice process could have: one process, and not init."""
    return is_pid(value) and value != 1


def is_start_time(value: object) -> bool:
    """A process start time as psutil reports it: Unix seconds, finite, after 1970."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )
