"""The journal's files: segment naming, the record format (header, CRC, batch ends),
scanning and repairing a segment's tail, and the data dir's holder lock.

A record is a header (magic, flags, payload length, CRC-32 of the rest, lsn) and its
payload; the last record of a batch carries the batch-end flag.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Final

import msgspec

__all__ = ["JournalCorrupt", "JournalError", "JournalHeld"]

_ZEROS: Final = bytes(64 * 1024)
_MAGIC: Final = 0xB1  # record format version 1
_BATCH_END: Final = 0x01
_HEADER: Final = struct.Struct("<BBIIQ")  # magic, flags, length, crc, lsn
_CRC_FIELDS: Final = struct.Struct("<BBIQ")  # magic, flags, length, lsn
_MAX_PAYLOAD: Final = 0xFFFF_FFFF
_HOLDER_FILE: Final = "holder"
_SEGMENT_NAME: Final = re.compile(r"^journal-(\d{16})\.seg$")


class JournalError(Exception):
    """The journal cannot do what was asked (closed, locked, released, or a failed write)."""


class JournalCorrupt(JournalError):
    """A record outside the torn tail of the last segment is damaged, missing or out of order."""


class JournalHeld(JournalError):
    """Another open journal holds the directory, in this process or another.

    ``holder`` is the process id the holder recorded when it took the directory (``None``
    when it recorded none); ``directory`` is the journal directory.
    """

    def __init__(self, directory: Path, holder: int | None) -> None:
        self.directory = directory
        self.holder = holder
        by = f" (process {holder})" if holder is not None else ""
        super().__init__(f"another open journal holds {directory}{by}")


class _Scan(msgspec.Struct, frozen=True, kw_only=True):
    """How far a segment's bytes hold valid records."""

    end: int  # offset after the last valid record
    next_lsn: int  # LSN after the last valid record
    batch_end: int  # offset after the last valid record that ends a batch
    batch_next_lsn: int  # LSN after that record


def _segment_path(directory: Path, first_lsn: int) -> Path:
    return directory / f"journal-{first_lsn:016d}.seg"


def _list_segments(directory: Path) -> list[tuple[int, Path]]:
    """Return ``(first LSN, path)`` of every segment file, in LSN order."""
    found = []
    for path in directory.iterdir():
        match = _SEGMENT_NAME.match(path.name)
        if match is not None:
            found.append((int(match.group(1)), path))
    return sorted(found)


def _crc(magic: int, flags: int, lsn: int, payload: bytes) -> int:
    return zlib.crc32(payload, zlib.crc32(_CRC_FIELDS.pack(magic, flags, len(payload), lsn)))


def _encode(lsn: int, payload: bytes, flags: int) -> bytes:
    crc = _crc(_MAGIC, flags, lsn, payload)
    return _HEADER.pack(_MAGIC, flags, len(payload), crc, lsn) + payload


def _record_at(data: bytes, offset: int, lsn: int | None) -> tuple[int, int, bytes] | None:
    """Decode the record at *offset* as ``(flags, lsn, payload)``; ``None`` when invalid.

    With *lsn* given, a record carrying any other LSN is invalid too.
    """
    if len(data) - offset < _HEADER.size:
        return None
    magic, flags, length, crc, found_lsn = _HEADER.unpack_from(data, offset)
    start = offset + _HEADER.size
    if magic != _MAGIC or len(data) - start < length or (lsn is not None and found_lsn != lsn):
        return None
    payload = data[start : start + length]
    if _crc(magic, flags, found_lsn, payload) != crc:
        return None
    return flags, found_lsn, payload


def _scan(data: bytes, first_lsn: int) -> _Scan:
    """Walk the valid records of one segment from its start."""
    offset, lsn = 0, first_lsn
    batch_end, batch_next = 0, first_lsn
    while (record := _record_at(data, offset, lsn)) is not None:
        offset += _HEADER.size + len(record[2])
        lsn += 1
        if record[0] & _BATCH_END:
            batch_end, batch_next = offset, lsn
    return _Scan(end=offset, next_lsn=lsn, batch_end=batch_end, batch_next_lsn=batch_next)


def _batch_ends_after(data: bytes, offset: int, min_lsn: int) -> int:
    """Count valid batch-ending records (LSN >= *min_lsn*) anywhere past *offset*."""
    count = 0
    while (offset := data.find(_MAGIC, offset)) != -1:
        record = _record_at(data, offset, None)
        if record is None or record[1] < min_lsn:
            offset += 1
            continue
        count += record[0] & _BATCH_END
        offset += _HEADER.size + len(record[2])
    return count


def _fsync_directory(dir_fd: int) -> None:
    os.fsync(dir_fd)


def _lock(dir_fd: int, directory: Path) -> None:
    """Take the directory's lock and record this process as its holder (``JournalHeld`` names
    the holder to whoever finds the directory taken)."""
    try:
        fcntl.flock(dir_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise JournalHeld(directory, _read_holder(directory)) from exc
        raise
    fd = os.open(directory / _HOLDER_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, f"{os.getpid()}\n".encode())
    finally:
        os.close(fd)


def _read_holder(directory: Path) -> int | None:
    try:
        text = (directory / _HOLDER_FILE).read_text()
    except OSError:
        return None
    return int(text) if text.strip().isdigit() else None


def _create_segment(directory: Path, dir_fd: int, first_lsn: int, *, fsync: bool) -> Path:
    path = _segment_path(directory, first_lsn)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.close(fd)
    if fsync:
        _fsync_directory(dir_fd)
    return path


def _delete_segment(path: Path) -> None:
    path.unlink()


def _repair_tail(path: Path, first_lsn: int, *, fsync: bool) -> tuple[int, int]:
    """Cut the last segment back to its last complete batch; return ``(size, next LSN)``."""
    data = path.read_bytes()
    scan = _scan(data, first_lsn)
    if scan.batch_end == len(data):
        return scan.batch_end, scan.batch_next_lsn
    head = _record_at(data, 0, None)
    if head is not None and head[1] != first_lsn:
        raise JournalCorrupt(f"{path.name} does not start at LSN {first_lsn}")
    # A crash tears at most the final batch, which holds one batch end; two mean lost data.
    if _batch_ends_after(data, scan.batch_end, scan.batch_next_lsn) > 1:
        raise JournalCorrupt(
            f"{path.name}: damaged record at LSN {scan.next_lsn} (offset {scan.end})"
            " with complete batches after it"
        )
    fd = os.open(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, scan.batch_end)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    return scan.batch_end, scan.batch_next_lsn


def _read_segment(
    file: BinaryIO, path: Path, first_lsn: int, end_lsn: int, limit: int | None
) -> Iterator[tuple[int, bytes]]:
    """Yield the records of one segment, which must hold exactly LSNs ``first..end-1``.

    *limit* bounds the bytes read (the active segment's acknowledged size).
    """
    offset = 0
    for lsn in range(first_lsn, end_lsn):
        data = file.read(_HEADER.size)
        if len(data) == _HEADER.size:
            data += file.read(_HEADER.unpack(data)[2])
        offset += len(data)
        record = _record_at(data, 0, lsn)
        if record is None or (limit is not None and offset > limit):
            raise JournalCorrupt(f"{path.name}: damaged or missing record at LSN {lsn}")
        yield lsn, record[2]
    if limit is None and _holds_data(file):
        raise JournalCorrupt(f"{path.name}: bytes after LSN {end_lsn - 1}")


def _holds_data(file: BinaryIO) -> bool:
    """Whether the rest of *file* holds anything but zeros (a crash can leave a closed
    segment's preallocated zeros in place)."""
    while chunk := file.read(len(_ZEROS)):
        if chunk.count(0) != len(chunk):
            return True
    return False
