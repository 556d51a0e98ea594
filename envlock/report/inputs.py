"""Report files as the commands read them: the bytes, or a DSSE envelope.

``envlock verify``, ``report show`` and ``report attach`` read a report file
(or standard input, ``-``) through ``read_report``; ``read_envelope`` parses it
with the strict reader, and a file that is not a DSSE envelope is an input
error (exit 2) naming the file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from envlock.errors import DataError

if TYPE_CHECKING:
    from envlock.report.dsse import Envelope


def read_report(path: str) -> bytes:
    from envlock.fsutil import read_input

    return read_input(
        path, "report", hint="give the file 'envlock report sign -o' wrote", stdin=True
    )


def read_envelope(path: str) -> Envelope:
    """The report file as a DSSE envelope, through the strict reader; a file
    that is not one is an input error (exit 2) naming the file."""
    from envlock.report import dsse

    data = read_report(path)
    try:
        return dsse.parse_envelope(data)
    except dsse.EnvelopeError as e:
        raise DataError(f"{path}: {e}", hint="is this a report 'envlock report sign' wrote?") from e
