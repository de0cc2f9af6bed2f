"""A reply's ``Content-Encoding`` undone here, step by step, never past the reply's cap.

httpx inflates each network chunk with one unbounded ``decompress`` call, so 1.8 KB of gzip
inside gzip (``Content-Encoding: gzip, gzip``) becomes gigabytes inside a single call, and
while that call runs the event loop cannot end the read at its deadline. The HTTP client
therefore reads the raw bytes and hands them to ``BodyDecoder``: it undoes only the codings
the client asks for (``ACCEPT_ENCODING``), at most ``MAX_CODINGS`` of them stacked, each
inflated ``STEP`` bytes at a time, and every layer's output counts against the same cap as
a plain reply. The work per reply is then bounded by the cap, whatever the server sends.

Brotli and zstd are not asked for and a reply encoded with them is refused: whether httpx
would decode them depends on which optional packages happen to be installed, and their
decoders do not all take an output bound.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable

__all__ = [
    "ACCEPT_ENCODING",
    "MAX_CODINGS",
    "BodyDecoder",
    "BodyTooLarge",
    "BodyUnreadable",
    "codings_of",
]

ACCEPT_ENCODING = "gzip, deflate"
# A server compresses once; a proxy that compresses again makes two. More is an attack.
MAX_CODINGS = 2
# Output of one inflate call: small enough that going past the cap costs at most this.
STEP = 64 * 1024

_ALIASES = {"gzip": "gzip", "x-gzip": "gzip", "deflate": "deflate"}
_GZIP_MAGIC = b"\x1f\x8b"


class BodyTooLarge(Exception):
    """The reply, or one of its layers, decodes to more than the cap."""


class BodyUnreadable(Exception):
    """A coding this client does not decode, too many of them, or corrupt compressed data."""


def codings_of(values: Iterable[str]) -> list[str]:
    """The codings of ``Content-Encoding`` header values in the order the server applied
    them (``identity`` left out); BodyUnreadable for one not asked for, or too many."""
    found: list[str] = []
    for value in values:
        for token in value.split(","):
            name = token.strip().lower()
            if not name or name == "identity":
                continue
            if name not in _ALIASES:
                raise BodyUnreadable(
                    f"the reply is encoded as {name!r}, which this client did not ask for "
                    f"(it accepts {ACCEPT_ENCODING})"
                )
            found.append(_ALIASES[name])
    if len(found) > MAX_CODINGS:
        raise BodyUnreadable(
            f"the reply stacks {len(found)} content encodings; at most {MAX_CODINGS} are decoded"
        )
    return found


class _Inflater:
    """One gzip or deflate layer, inflated in bounded steps; its whole output counted."""

    def __init__(self, coding: str, cap: int, what: str) -> None:
        self.coding = coding
        self.cap = cap
        self.what = what
        self.total = 0
        self._zlib: zlib._Decompress | None = None
        self._head = b""  # deflate: the first bytes, until they say zlib or raw
        self._fed = False

    def _start(self, data: bytes) -> bytes:
        """Make the decompressor for a new stream (a gzip member, a deflate body); return
        the bytes still to feed, or keep them back until they say which kind it is."""
        if self.coding == "gzip":
            self._zlib = zlib.decompressobj(16 + zlib.MAX_WBITS)
            return data
        head = self._head + data
        if len(head) < 2:
            self._head = head
            return b""
        self._head = b""
        # "deflate" is meant to be zlib-wrapped (RFC 9110) but some servers send raw deflate.
        wrapped = head[0] & 0x0F == 8 and (head[0] << 8 | head[1]) % 31 == 0
        self._zlib = zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
        return head

    def _count(self, piece: bytes) -> None:
        self.total += len(piece)
        if self.total > self.cap:
            raise BodyTooLarge(
                f"{self.what} exceeded {self.cap} bytes once its {self.coding} encoding was undone"
            )

    def feed(self, data: bytes) -> bytes:
        out = bytearray()
        pending = data
        if pending:
            self._fed = True
        try:
            while pending or (self._zlib is not None and not self._zlib.eof):
                if self._zlib is None or self._zlib.eof:
                    if self._zlib is not None and self.coding == "deflate":
                        break  # a deflate body is one stream; what follows it is ignored
                    pending = self._start(pending)
                    if self._zlib is None:
                        break
                piece = self._zlib.decompress(pending, STEP)
                self._count(piece)
                out += piece
                if self._zlib.eof:
                    pending = self._zlib.unused_data
                    continue
                pending = self._zlib.unconsumed_tail
                if not pending and len(piece) < STEP:
                    break  # all input taken and no output held back: wait for more
        except zlib.error as exc:
            raise BodyUnreadable(f"the reply's {self.coding} data is corrupt ({exc})") from None
        return bytes(out)

    def finish(self) -> None:
        if self._fed and (self._zlib is None or not self._zlib.eof):
            # An empty body says nothing about its coding; a started one must be whole.
            raise BodyUnreadable(f"the reply's {self.coding} data ends before its end")


class BodyDecoder:
    """Raw body bytes in, decoded bytes out, every layer bounded by ``cap``.

    ``what`` names the body in the error ("response", "stream"). The raw bytes are bounded
    too, a little above the cap (stored deflate blocks add a few bytes per 64 KB), so a
    stream of empty compressed blocks cannot be read forever within a long deadline.
    """

    def __init__(self, content_encoding: Iterable[str], cap: int, what: str = "response") -> None:
        self.cap = cap
        self.what = what
        self.raw_cap = cap + cap // 8 + 4096
        self.raw_total = 0
        self.total = 0
        # Undone in the reverse of the order they were applied.
        self._layers = [_Inflater(c, cap, what) for c in reversed(codings_of(content_encoding))]

    @property
    def encoded(self) -> bool:
        return bool(self._layers)

    def feed(self, raw: bytes) -> bytes:
        self.raw_total += len(raw)
        if self.raw_total > self.raw_cap:
            raise BodyTooLarge(f"{self.what} exceeded {self.cap} bytes")
        data = raw
        for layer in self._layers:
            data = layer.feed(data)
        return self._counted(data)

    def finish(self) -> None:
        """Once the raw stream has ended: BodyUnreadable when a compressed stream was cut
        short. Nothing is held back to return; ``feed`` drains every layer each time."""
        for layer in self._layers:
            layer.finish()

    def _counted(self, data: bytes) -> bytes:
        self.total += len(data)
        if self.total > self.cap:
            raise BodyTooLarge(f"{self.what} exceeded {self.cap} bytes")
        return data
