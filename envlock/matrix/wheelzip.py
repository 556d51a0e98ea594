"""Read single members of a remote zip (a wheel) with HTTP range requests.

A wheel's table of contents is at its end: the end-of-central-directory record
(EOCD, plus the zip64 record and locator for large archives) points at the
central directory, whose entries give each member's local header offset,
compression method and compressed size. So a member costs: one suffix range
for the tail, one range for the central directory (unless the tail already
holds it) and one range for the member's local header plus its data.

Only stored (0) and deflated (8) members are supported; that is what wheels use.
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
        self.members: dict[str, Member] = {}
        self._read_directory()

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
        self._parse_directory(directory, n_total)

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

    def _parse_directory(self, data: bytes, count: int) -> None:
        pos = 0
        for _ in range(count):
            if data[pos : pos + 4] != _CENTRAL:
                raise self._bad("broken central directory entry")
            (
                _sig,
                _made,
                _need,
                flags,
                method,
                _time,
                _date,
                crc,
                csize,
                usize,
                nlen,
                xlen,
                clen,
                _disk,
                _iattr,
                _eattr,
                offset,
            ) = struct.unpack("<4sHHHHHHIIIHHHHHII", data[pos : pos + 46])
            raw_name = data[pos + 46 : pos + 46 + nlen]
            extra = data[pos + 46 + nlen : pos + 46 + nlen + xlen]
            name = raw_name.decode("utf-8" if flags & 0x800 else "cp437")
            if 0xFFFFFFFF in (csize, usize, offset):
                usize, csize, offset = _zip64_extra(extra, usize, csize, offset)
            self.members[name] = Member(name, method, csize, usize, offset, crc)
            pos += 46 + nlen + xlen + clen

    def find(self, predicate: Callable[[str], bool]) -> list[str]:
        return sorted(n for n in self.members if predicate(n))

    def read(self, name: str) -> bytes:
        """The uncompressed bytes of one member (its CRC is checked)."""
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
