"""The parts of a ``.pt`` zip that reading one tensor needs, read straight from the zip's records.

torch.save writes a small zip (``pt_file.py``): its members stored uncompressed, the small ones (data.pkl,
byteorder...) first, the storage's bytes after them, then the central directory and the end records
(zip64's always, then the classic one). :mod:`zipfile` reads all of it into objects and opens a file
object per member: 0.2-0.3 ms of CPU per file, a third of the time a small tensor takes. :class:`PtZip`
reads the file's first ``HEAD_BYTES`` and its last ``TAIL_BYTES`` (two reads for most files), and from them
the central directory, the members' local headers and the small members' bytes, checking what
:mod:`zipfile` checks on the way: the records' signatures, the central directory inside the file, the
local header naming the member, the CRC-32 of what it reads, the sizes. Whatever does not hold raises
:class:`BadZip`. A member stored compressed (never written by torch) is left to :mod:`zipfile`.
"""

from __future__ import annotations

import os
import struct
import zlib
from typing import NamedTuple

HEAD_BYTES = 4096
TAIL_BYTES = 4096
STORED = 0

_END = b"PK\x05\x06"
_END64 = b"PK\x06\x06"
_LOCATOR64 = b"PK\x06\x07"
_CENTRAL = b"PK\x01\x02"
ZIP_MAGIC = b"PK\x03\x04"
"""A local file header's signature, with which a zip (and so a ``.pt``) starts."""
_END_RECORD = struct.Struct("<4s4H2LH")  # signature, disks, entries here / in all, size, offset, comment
_END64_RECORD = struct.Struct("<4sQ2H2L4Q")  # signature, size, versions, disks, entries, size, offset
_LOCATOR64_RECORD = struct.Struct("<4sLQL")
_CENTRAL_RECORD = struct.Struct("<4s6H3L5H2L")  # up to the name: sizes, lengths, offset
_LOCAL_RECORD = struct.Struct("<4s5H3L2H")
_MAX_COMMENT = 0xFFFF
_UTF8_NAME = 0x800
_ENCRYPTED = 0x1
_PATCHED_OR_STRONG = 0x20 | 0x40
_ZIP64_EXTRA = 0x0001


class BadZip(ValueError):
    """The file is not a zip this reader can read (truncated, damaged, encrypted...)."""


class Member(NamedTuple):
    name: str
    method: int  # 0 stored, 8 deflated...
    flags: int
    crc: int
    compressed_size: int
    size: int
    header_offset: int  # of its local header


class PtZip:
    """An open ``.pt`` zip's members (``members``, by name) and their bytes, read from ``fd`` (a file
    descriptor open for reading; every read says where), whose first bytes are ``head`` (``HEAD_BYTES`` of
    them, or the whole file)."""

    def __init__(self, fd: int, head: bytes) -> None:
        self._fd = fd
        self.file_size = os.fstat(fd).st_size
        self._head = head
        self._tail_start = max(self.file_size - TAIL_BYTES, len(head))
        self._tail = os.pread(fd, self.file_size - self._tail_start, self._tail_start)
        self.members = self._central_directory()

    def _read(self, offset: int, count: int) -> bytes:
        """``count`` bytes at ``offset``, from the first or last bytes read when they hold them; all of
        them or BadZip."""
        if offset < 0 or count < 0:
            raise BadZip(f"bad offset {offset} or size {count} in the zip's records")
        if offset + count <= len(self._head):
            return self._head[offset : offset + count]
        tail_offset = offset - self._tail_start
        if tail_offset >= 0 and tail_offset + count <= len(self._tail):
            return self._tail[tail_offset : tail_offset + count]
        data = os.pread(self._fd, count, offset) if count else b""
        if len(data) != count:
            raise BadZip(f"truncated: {count} bytes wanted at {offset}, the file has {self.file_size}")
        return data

    def _end_record(self) -> tuple[int, int, int]:
        """(where the end record starts, the central directory's size, its offset as written)."""
        size = self.file_size
        if size < _END_RECORD.size:
            raise BadZip("file too short for a zip")
        last = self._read(size - _END_RECORD.size, _END_RECORD.size)
        if last[:4] == _END and last[-2:] == b"\0\0":
            where = size - _END_RECORD.size  # no comment: where torch.save puts it
        else:
            search_start = max(size - _MAX_COMMENT - _END_RECORD.size, 0)
            found = self._read(search_start, size - search_start).rfind(_END)
            if found < 0 or search_start + found + _END_RECORD.size > size:
                raise BadZip("no end of central directory record (not a zip, or truncated)")
            where = search_start + found
        record = _END_RECORD.unpack(self._read(where, _END_RECORD.size))
        cd_size, cd_offset = record[5], record[6]
        if where >= _LOCATOR64_RECORD.size:
            locator = self._read(where - _LOCATOR64_RECORD.size, _LOCATOR64_RECORD.size)
            if locator[:4] == _LOCATOR64:
                return self._end64_record(where - _LOCATOR64_RECORD.size)
        return where, cd_size, cd_offset

    def _end64_record(self, locator_at: int) -> tuple[int, int, int]:
        """zip64's end record, just before its locator (where zipfile looks for it, too)."""
        where = locator_at - _END64_RECORD.size
        if where < 0:
            raise BadZip("truncated zip64 end of central directory record")
        record = _END64_RECORD.unpack(self._read(where, _END64_RECORD.size))
        if record[0] != _END64:
            raise BadZip("bad zip64 end of central directory record")
        return where, record[8], record[9]

    def _central_directory(self) -> dict[str, Member]:
        end_at, cd_size, cd_offset = self._end_record()
        shift = end_at - cd_size - cd_offset  # bytes prepended to the zip (0 for torch.save's)
        start = cd_offset + shift
        if start < 0 or shift < 0:
            raise BadZip("bad offset for the central directory")
        directory = self._read(start, cd_size)
        members: dict[str, Member] = {}
        at, end, record = 0, len(directory), _CENTRAL_RECORD.size
        while at < end:
            if at + record > end or directory[at : at + 4] != _CENTRAL:
                raise BadZip("bad magic number for the central directory")
            _, _, _, flags, method, _, _, crc, packed, size, name_len, extra_len, comment_len, *_, offset = (
                _CENTRAL_RECORD.unpack_from(directory, at)
            )
            name_at = at + record
            at = name_at + name_len + extra_len + comment_len  # (past the end: zipfile reads what is there)
            if 0xFFFFFFFF in (size, packed, offset):  # (torch.save's small members never are)
                extra = directory[name_at + name_len : name_at + name_len + extra_len]
                size, packed, offset = zip64_sizes(extra, size, packed, offset)
            name = _name(directory[name_at : name_at + name_len], flags)
            members[name] = Member(name, method, flags, crc, packed, size, offset + shift)
        return members

    def data_start(self, member: Member) -> int:
        """Where ``member``'s bytes start in the file (after its local header, which must name it)."""
        header = self._read(member.header_offset, _LOCAL_RECORD.size)
        fields = _LOCAL_RECORD.unpack(header)
        if fields[0] != ZIP_MAGIC:
            raise BadZip(f"bad magic number for the file header of {member.name}")
        name_len, extra_len = fields[9], fields[10]
        name_at = member.header_offset + _LOCAL_RECORD.size
        raw_name = self._read(name_at, name_len)
        if _name(raw_name, fields[2]) != member.name:
            raise BadZip(f"file name in the directory {member.name!r} and in its header {raw_name!r} differ")
        if member.flags & (_ENCRYPTED | _PATCHED_OR_STRONG):
            raise BadZip(f"{member.name} is encrypted or patched")
        return name_at + name_len + extra_len

    def stored_bytes(self, member: Member) -> bytes:
        """The bytes of a member stored uncompressed, their CRC-32 checked."""
        if member.method != STORED:
            raise BadZip(f"{member.name} is compressed")
        data = self._read(self.data_start(member), min(member.size, member.compressed_size))
        if zlib.crc32(data) != member.crc:
            raise BadZip(f"bad CRC-32 for {member.name}")
        return data


def _name(raw: bytes, flags: int) -> str:
    """A member's name as its record's bytes and flags give it: UTF-8 or code page 437, which agree on
    ASCII (decoded the fastest way)."""
    if raw.isascii():
        return raw.decode("ascii")
    return raw.decode("utf-8" if flags & _UTF8_NAME else "cp437")


def zip64_sizes(extra: bytes, size: int, packed: int, offset: int) -> tuple[int, int, int]:
    """The sizes and offset of a central directory record, the ones it marks 0xFFFFFFFF taken from its
    zip64 extra field (in that order)."""
    wanted = [n == 0xFFFFFFFF for n in (size, packed, offset)]
    if not any(wanted):
        return size, packed, offset
    at = 0
    while at + 4 <= len(extra):
        kind, length = struct.unpack_from("<HH", extra, at)
        if kind == _ZIP64_EXTRA:
            if at + 4 + length > len(extra):
                break
            values = iter(struct.unpack_from(f"<{length // 8}Q", extra, at + 4))
            try:
                found = [next(values) if want else n for want, n in zip(wanted, (size, packed, offset))]
            except StopIteration:
                raise BadZip("corrupt zip64 extra field") from None
            return found[0], found[1], found[2]
        at += 4 + length
    raise BadZip("zip64 sizes without a zip64 extra field")
