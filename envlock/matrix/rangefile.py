"""A read-only, seekable file over HTTP range requests, for the standard ``zipfile``.

``zipfile.ZipFile(RangeFile(fetch, name))`` reads a remote wheel's members
without downloading it. ``fetch`` has the shape of ``refresh.range_fetcher``'s
function: ``fetch(start, end_inclusive) -> (bytes, total_size)`` and
``fetch(-n, None)`` for the last n bytes.

The bytes fetched are kept as a few blocks, so each of zipfile's reads costs at
most one request:

- the tail (the last 64 KiB + 22 bytes) is fetched when the file is made; it
  holds the end-of-central-directory records (zip64 included) and, for small
  archives, the whole central directory or the whole file;
- zipfile reads the central directory with one ``read(size_cd)``; a read is
  served by one request for the bytes it lacks (up to the tail already held);
- a read that ends beyond what is held fetches ``READ_AHEAD`` bytes more, so a
  member's local header, name and (small) compressed data come in one request.
"""

from __future__ import annotations

import io
from collections.abc import Callable

from envlock.errors import EnvironmentFailure

TAIL = 64 * 1024 + 22  # the EOCD record and its comment of at most 64 KiB
READ_AHEAD = 64 * 1024  # local header + name + extra + a METADATA or build_info.py

# fetch(start, end_inclusive) -> (bytes, total) ; fetch(-n, None) -> the last n bytes
Fetch = Callable[[int, "int | None"], "tuple[bytes, int]"]


class RangeFile(io.RawIOBase):
    """The bytes of a remote file, read through ``fetch`` on demand.

    ``requests`` and ``bytes_read`` count what was fetched.
    """

    def __init__(
        self, fetch: Fetch, name: str, *, tail: int = TAIL, read_ahead: int = READ_AHEAD
    ) -> None:
        super().__init__()
        self._fetch = fetch
        self.name = name
        self.requests = 0
        self.bytes_read = 0
        self._read_ahead = read_ahead
        self._blocks: list[tuple[int, bytes]] = []  # (start, data): sorted, disjoint
        self._pos = 0
        data, total = fetch(-tail, None)
        self._count(data)
        if total < len(data):
            raise self.damaged(f"the server sent {len(data)} bytes of a {total}-byte file")
        self.size = total
        if data:
            self._blocks.append((total - len(data), data))

    # -- io.RawIOBase ------------------------------------------------------

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        self._checkClosed()  # io's own check
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._checkClosed()
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            pos = self.size + offset
        else:
            raise ValueError(f"invalid whence ({whence})")
        if pos < 0:
            raise OSError(22, f"negative seek position {pos}")  # what a real file raises
        self._pos = pos
        return pos

    def read(self, size: int | None = -1) -> bytes:
        self._checkClosed()
        start = self._pos
        end = self.size if size is None or size < 0 else min(self.size, start + size)
        if end <= start:
            return b""
        data = self._range(start, end)
        self._pos = end
        return data

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        view = memoryview(buffer).cast("B")
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)

    # -- the blocks --------------------------------------------------------

    def _range(self, start: int, end: int) -> bytes:
        """Bytes [start, end), fetching what is not held with one request."""
        block = self._holding(start, end)
        if block is None:
            self._fill(start, end)
            block = self._holding(start, end)
            if block is None:  # _fill checked the answer's length: cannot happen
                raise self.damaged(f"bytes {start}-{end - 1} could not be read")
        bstart, data = block
        return data[start - bstart : end - bstart]

    def _holding(self, start: int, end: int) -> tuple[int, bytes] | None:
        for bstart, data in self._blocks:
            if bstart <= start and end <= bstart + len(data):
                return bstart, data
        return None

    def _fill(self, start: int, end: int) -> None:
        # the gaps in [start, end): fetch from the first gap's start to the last one's end
        gaps: list[tuple[int, int]] = []
        pos = start
        for bstart, data in self._blocks:
            bend = bstart + len(data)
            if bend <= pos:
                continue
            if bstart >= end:
                break
            if bstart > pos:
                gaps.append((pos, bstart))
            pos = max(pos, bend)
        if pos < end:
            gaps.append((pos, end))
        first, last = gaps[0][0], gaps[-1][1]
        if last == end:  # the read ends in a gap: read ahead, up to the next block
            ahead = min(self.size, max(end, first + self._read_ahead))
            for bstart, _data in self._blocks:
                if end <= bstart < ahead:
                    ahead = bstart
                    break
            last = ahead
        data, total = self._fetch(first, last - 1)
        self._count(data)
        if total != self.size:
            raise self.damaged(f"its size changed from {self.size} to {total} bytes while reading")
        if len(data) != last - first:
            raise self.damaged(
                f"the server sent {len(data)} bytes for bytes {first}-{last - 1} "
                f"({last - first} bytes)"
            )
        self._add(first, data)

    def _add(self, start: int, data: bytes) -> None:
        """Hold ``data`` at ``start``, merging blocks that touch or overlap it."""
        merged_start, merged = start, data
        kept: list[tuple[int, bytes]] = []
        for bstart, bdata in self._blocks:
            bend = bstart + len(bdata)
            if bend < merged_start or bstart > merged_start + len(merged):
                kept.append((bstart, bdata))
                continue
            lo = min(bstart, merged_start)
            hi = max(bend, merged_start + len(merged))
            out = bytearray(hi - lo)
            out[bstart - lo : bend - lo] = bdata
            out[merged_start - lo : merged_start - lo + len(merged)] = merged
            merged_start, merged = lo, bytes(out)
        kept.append((merged_start, merged))
        kept.sort(key=lambda b: b[0])
        self._blocks = kept

    def _count(self, data: bytes) -> None:
        self.requests += 1
        self.bytes_read += len(data)

    def damaged(self, problem: str) -> EnvironmentFailure:
        """The bytes served are not a readable file: the input was right, what
        the server sent was not (exit 3)."""
        return EnvironmentFailure(
            f"{self.name}: not a readable wheel: {problem}",
            hint="the file server sent damaged or other bytes than the file's; "
            "try again, and report it to the index if it persists",
        )
