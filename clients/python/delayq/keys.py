"""Key names, id routing and argument checks, as libdelayq's src/lib/keys.c.

Every check here gives the same one-line message as libdelayq, so that a
refused argument reads the same in every language.
"""
import re

from .errors import InvalidError

QUEUE_MAX = 128
TYPE_MAX = 128
ID_MAX = 256
SCHEDULE_NAME_MAX = 128
PARTITIONS_MAX = 256
MAX_AHEAD_MS = 3153600000000  # 100 years of 365 days
DEFAULT_MAX_PAYLOAD = 1024 * 1024
MAX_ATTEMPTS = 2**31 - 1
KEY_SUFFIXES = ("jobs", "delayed", "processing", "dead", "meta", "lease")

# The id of a job made by a recurring schedule (docs/protocol.md, "Id ->
# partition"): NAME@ then, optionally, "now-", then a UTC time to the
# second, optionally a fraction, then Z.  NAME is everything before the
# first '@' (a schedule name has none) and is not empty.
SCHEDULE_ID = re.compile(
    rb"[^@]+@(?:now-)?[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?Z\Z")


def _crc16_table():
    table = []
    for i in range(256):
        crc = i << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
        table.append(crc & 0xFFFF)
    return table


_CRC16 = _crc16_table()


def crc16(data: bytes) -> int:
    """CRC16-XMODEM (CCITT, poly 0x1021, init 0) of the whole of `data`:
    the Redis Cluster hash without hash tags and without mod 16384."""
    crc = 0
    for b in data:
        crc = ((crc << 8) & 0xFFFF) ^ _CRC16[((crc >> 8) ^ b) & 0xFF]
    return crc


def to_bytes(s) -> bytes:
    return s if isinstance(s, bytes) else str(s).encode()


def is_schedule_id(job_id) -> bool:
    return SCHEDULE_ID.match(to_bytes(job_id)) is not None


def partition_of(job_id, nparts: int) -> int:
    """The partition (0..nparts-1) of a job id: a generated id (all digits)
    is its number mod N; a schedule's job id is 0; any other is
    crc16(whole id) mod N."""
    if nparts <= 1:
        return 0
    b = to_bytes(job_id)
    if is_schedule_id(b):
        return 0
    if b and b.isdigit():
        return int(b) % nparts
    return crc16(b) % nparts


def _plain(b: bytes) -> bool:
    return all(0x20 < c <= 0x7E for c in b)


def check_queue(queue):
    b = to_bytes(queue) if queue is not None else b""
    if not b:
        raise InvalidError("queue name is empty")
    if len(b) > QUEUE_MAX:
        raise InvalidError("queue name is longer than 128 bytes")
    if not _plain(b):
        raise InvalidError("queue name has a space or a non-printable character")
    if b"{" in b or b"}" in b:
        raise InvalidError("queue name contains '{' or '}'")
    return b.decode()


def check_prefix(prefix):
    b = to_bytes(prefix) if prefix is not None else b""
    if not b:
        raise InvalidError("key prefix is empty")
    if len(b) > 64:
        raise InvalidError("key prefix is longer than 64 bytes")
    if not _plain(b) or b"{" in b or b"}" in b:
        raise InvalidError("key prefix has a space, a brace or a non-printable character")
    return b.decode()


def check_type(jtype):
    b = to_bytes(jtype) if jtype is not None else b""
    if not b:
        raise InvalidError("job type is empty")
    if len(b) > TYPE_MAX:
        raise InvalidError("job type is longer than 128 bytes")
    if not _plain(b):
        raise InvalidError("job type has a space or a non-printable character")
    if b == b"*":
        raise InvalidError("job type '*' is kept for the handler table's fallback")
    return b.decode()


def check_id(job_id):
    """A producer's own id, as enqueue takes it."""
    b = to_bytes(job_id) if job_id is not None else b""
    if not b:
        raise InvalidError("job id is empty")
    if len(b) > ID_MAX:
        raise InvalidError("job id is longer than 256 bytes")
    if not _plain(b):
        raise InvalidError("job id has a space or a non-printable character")
    if b.isdigit():
        raise InvalidError("job id is all digits (that form is kept for generated ids)")
    if is_schedule_id(b):
        raise InvalidError("job id has the form NAME@2026-01-06T00:00:00Z, kept for the "
                           "jobs of recurring schedules")
    return b.decode()


def check_named_id(job_id):
    """An id that names an existing job (show, cancel, ...)."""
    if job_id is None or to_bytes(job_id) == b"":
        raise InvalidError("job id is empty")
    return job_id


def check_schedule_name(name):
    b = to_bytes(name) if name is not None else b""
    if not b:
        raise InvalidError("schedule name is empty")
    if len(b) > SCHEDULE_NAME_MAX:
        raise InvalidError("schedule name is longer than 128 bytes")
    if not _plain(b):
        raise InvalidError("schedule name has a space or a non-printable character")
    if b"@" in b:
        raise InvalidError("schedule name contains '@' (it separates the name from the "
                           "tick in job ids)")
    return b.decode()


def tag(queue: str, part: int, nparts: int) -> str:
    return queue if nparts <= 1 else "%s:%d" % (queue, part)


def queue_keys(prefix: str, queue: str, part: int = 0, nparts: int = 1):
    """The six keys every queue script takes, and the wake channel."""
    t = tag(queue, part, nparts)
    return ["%s:{%s}:%s" % (prefix, t, s) for s in KEY_SUFFIXES], "%s:{%s}:wake" % (prefix, t)


def sched_keys(prefix: str, queue: str, nparts: int = 1):
    t = tag(queue, 0, nparts)
    return ["%s:{%s}:schedules" % (prefix, t), "%s:{%s}:schedule_due" % (prefix, t)]


def meta_key(prefix: str, queue: str) -> str:
    """The unpartitioned meta hash: partitions and protocol live there."""
    return "%s:{%s}:meta" % (prefix, queue)


def registry_key(prefix: str) -> str:
    return "%s:queues" % prefix
