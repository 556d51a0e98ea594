"""Read single members of a remote zip (a wheel) with HTTP range requests.

A wheel's table of contents is at its end: the end-of-central-directory record
(EOCD, plus the zip64 record and locator for large archives) points at the
central directory, whose entries give each member's local header offset,
compression method and compressed size. So a member costs: one suffix range
for the tail, one range for the central directory (unless the tail already
holds it) and one range for the member's local header plus its data.

Only stored (0) and deflated (8) members are supported; that is what wheels use.

Why not the standard ``zipfile`` over a range-reading file object: it decodes
every central directory entry into a ZipInfo (15,000-24,000 per TensorFlow
wheel) before a member can be found, which made the full ``envlock matrix
refresh`` 2.8x slower and CPU-bound (measured in BENCHMARKS.md); this reader
searches the directory bytes for the two names it needs. The tests check it
against ``zipfile`` on generated archives. ``envlock.matrix.wheel_members``
holds both readers (zipfile over ``rangefile.RangeFile``, and this one);
its ``DEFAULT_READER`` picks which ``matrix refresh`` uses.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from envlock.errors import DataError

TAIL = 64 * 1024 + 22  # the EOCD comment is at most 64 KiB
LOCAL_SLACK = 1024  # guess for the local header's extra field

_EOCD = b"PK\x05\x06"
_ZIP64_LOCATOR = b"PK\x06\x07"
_ZIP64_EOCD = b"PK\x06\x06"
_CENTRAL = b"PK\x01\x02"
_LOCAL = b"PK\x03\x04"

# fetch(start, end_inclusive) -> bytes ; fetch(-n, None) -> last n bytes
Fetch = Callable[[int, "int | None"], "tuple[bytes, int]"]

_CENTRAL_HEADER = struct.Struct("<4sHHHHHHIIIHHHHHII")  # 46 bytes


@dataclass(frozen=True)
class Member:
    name: str
    method: int
    compressed_size: int
    size: int
    header_offset: int
    crc: int


class RemoteZip:
    """The members of a zip reachable through ``fetch``, a range-reading function.

    ``fetch(start, end)`` returns ``(bytes, total_size)`` for the inclusive
    range; ``fetch(-n, None)`` returns the last n bytes.
    """

    def __init__(self, fetch: Fetch, name: str) -> None:
        self._fetch = fetch
        self.name = name
        self.requests = 0
        self.bytes_read = 0
        self._directory = b""
        self._count = 0
        self._entries: list[tuple[bytes, int]] | None = None  # (raw name, offset), lazily
        self._members: dict[str, Member] | None = None
        self._read_directory()

    @property
    def entries(self) -> list[tuple[bytes, int]]:
        if self._entries is None:
            self._entries = self._walk_directory()
        return self._entries

    @property
    def members(self) -> dict[str, Member]:
        """Every member by name (decoded on first use; wheels have tens of thousands)."""
        if self._members is None:
            self._members = {}
            for _raw, pos in self.entries:
                m = self._member_at(pos)
                self._members[m.name] = m
        return self._members

    def _get(self, start: int, end: int | None) -> tuple[bytes, int]:
        data, total = self._fetch(start, end)
        self.requests += 1
        self.bytes_read += len(data)
        return data, total

    def _bad(self, problem: str) -> DataError:
        return DataError(
            f"{self.name}: not a readable wheel: {problem}",
            hint="the index served a damaged or unusual file; try again or report it",
        )

    def _read_directory(self) -> None:
        tail, total = self._get(-TAIL, None)
        tail_start = total - len(tail)
        pos = tail.rfind(_EOCD)
        if pos < 0 or len(tail) - pos < 22:
            raise self._bad("no end-of-central-directory record")
        (_sig, _disk, _cd_disk, _n_disk, n_total, cd_size, cd_offset, _clen) = struct.unpack(
            "<4sHHHHIIH", tail[pos : pos + 22]
        )
        if n_total == 0xFFFF or cd_size == 0xFFFFFFFF or cd_offset == 0xFFFFFFFF:
            n_total, cd_size, cd_offset = self._zip64(tail, tail_start, pos)
        if cd_offset + cd_size > total:
            raise self._bad("central directory outside the file")
        if cd_offset >= tail_start:
            rel = cd_offset - tail_start
            directory = tail[rel : rel + cd_size]
        else:
            directory, _ = self._get(cd_offset, cd_offset + cd_size - 1)
        if len(directory) != cd_size:
            raise self._bad("short central directory")
        if directory[:4] != _CENTRAL and n_total:
            raise self._bad("broken central directory")
        self._directory = directory
        self._count = n_total

    def _zip64(self, tail: bytes, tail_start: int, eocd_pos: int) -> tuple[int, int, int]:
        loc = eocd_pos - 20
        if loc < 0 or tail[loc : loc + 4] != _ZIP64_LOCATOR:
            raise self._bad("zip64 sizes without a zip64 locator")
        (_sig, _disk, z64_offset, _disks) = struct.unpack("<4sIQI", tail[loc : loc + 20])
        if z64_offset >= tail_start:
            rec = tail[z64_offset - tail_start : z64_offset - tail_start + 56]
        else:
            rec, _ = self._get(z64_offset, z64_offset + 55)
        if len(rec) < 56 or rec[:4] != _ZIP64_EOCD:
            raise self._bad("no zip64 end-of-central-directory record")
        fields = struct.unpack("<4sQHHIIQQQQ", rec[:56])
        n_total, cd_size, cd_offset = fields[7], fields[8], fields[9]
        return n_total, cd_size, cd_offset

    def _walk_directory(self) -> list[tuple[bytes, int]]:
        """Every entry's raw name and position (no decoding: wheels have ~20k)."""
        data = self._directory
        count = self._count
        unpack = _CENTRAL_HEADER.unpack_from
        entries: list[tuple[bytes, int]] = []
        pos = 0
        size = len(data)
        for _ in range(count):
            if pos + 46 > size:
                raise self._bad("short central directory")
            head = unpack(data, pos)
            if head[0] != _CENTRAL:
                raise self._bad("broken central directory entry")
            nlen, xlen, clen = head[10], head[11], head[12]
            entries.append((data[pos + 46 : pos + 46 + nlen], pos))
            pos += 46 + nlen + xlen + clen
        return entries

    def _member_at(self, pos: int) -> Member:
        data = self._directory
        head = _CENTRAL_HEADER.unpack_from(data, pos)
        flags, method, crc, csize, usize = head[3], head[4], head[7], head[8], head[9]
        nlen, xlen, offset = head[10], head[11], head[16]
        raw_name = data[pos + 46 : pos + 46 + nlen]
        extra = data[pos + 46 + nlen : pos + 46 + nlen + xlen]
        name = raw_name.decode("utf-8" if flags & 0x800 else "cp437")
        if 0xFFFFFFFF in (csize, usize, offset):
            usize, csize, offset = _zip64_extra(extra, usize, csize, offset)
        return Member(name, method, csize, usize, offset, crc)

    def find(self, predicate: Callable[[str], bool]) -> list[str]:
        return sorted(n for n in self.members if predicate(n))

    def find_suffix(self, suffix: str) -> list[Member]:
        """Members whose name ends with ``suffix``, sorted by name.

        Searches the directory bytes for the suffix and checks that each hit is
        the end of an entry's name; anything unexpected falls back to walking
        every entry, so the answer is the same either way.
        """
        needle = suffix.encode("utf-8")
        if self._entries is None:
            fast = self._find_fast(needle)
            if fast is not None:
                return sorted((self._member_at(pos) for pos in fast), key=lambda m: m.name)
        found = [self._member_at(pos) for raw, pos in self.entries if raw.endswith(needle)]
        return sorted(found, key=lambda m: m.name)

    def _find_fast(self, needle: bytes) -> list[int] | None:
        data = self._directory
        if data.count(_CENTRAL) != self._count:
            # A name, extra field or comment holds the header signature itself,
            # so searching backwards for it could land inside an entry: walk.
            return None
        hits: list[int] = []
        q = data.find(needle)
        while q >= 0:
            start = data.rfind(_CENTRAL, 0, q)
            if start < 0 or start + 46 > len(data):
                return None
            head = _CENTRAL_HEADER.unpack_from(data, start)
            name_start, name_end = start + 46, start + 46 + head[10]
            if not name_start <= q < name_end:
                return None  # the hit is not inside the entry found before it: walk instead
            if name_end == q + len(needle):
                hits.append(start)
            q = data.find(needle, q + 1)
        return hits

    def read(self, name: str | Member) -> bytes:
        """The uncompressed bytes of one member (its CRC is checked)."""
        if isinstance(name, Member):
            m: Member | None = name
            name = name.name
        else:
            m = self.members.get(name)
        if m is None:
            raise self._bad(f"no member {name}")
        want = 30 + len(name.encode("utf-8")) + LOCAL_SLACK + m.compressed_size
        chunk, _ = self._get(m.header_offset, m.header_offset + want - 1)
        if chunk[:4] != _LOCAL:
            raise self._bad(f"no local header for {name}")
        nlen, xlen = struct.unpack("<HH", chunk[26:30])
        start = 30 + nlen + xlen
        end = start + m.compressed_size
        if len(chunk) < end:
            more, _ = self._get(m.header_offset + len(chunk), m.header_offset + end - 1)
            chunk += more
        raw = chunk[start:end]
        if m.method == 0:
            data = raw
        elif m.method == 8:
            try:
                data = zlib.decompress(raw, -15)
            except zlib.error as e:
                raise self._bad(f"{name} does not inflate: {e}") from None
        else:
            raise self._bad(f"{name} uses compression method {m.method}")
        if zlib.crc32(data) != m.crc:
            raise self._bad(f"{name} fails its CRC check")
        return data


def _zip64_extra(extra: bytes, usize: int, csize: int, offset: int) -> tuple[int, int, int]:
    pos = 0
    while pos + 4 <= len(extra):
        tag, size = struct.unpack("<HH", extra[pos : pos + 4])
        body = extra[pos + 4 : pos + 4 + size]
        if tag == 0x0001:
            values = [v for (v,) in struct.iter_unpack("<Q", body[: len(body) // 8 * 8])]
            i = 0
            if usize == 0xFFFFFFFF and i < len(values):
                usize = values[i]
                i += 1
            if csize == 0xFFFFFFFF and i < len(values):
                csize = values[i]
                i += 1
            if offset == 0xFFFFFFFF and i < len(values):
                offset = values[i]
            break
        pos += 4 + size
    return usize, csize, offset
