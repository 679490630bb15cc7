"""The few MessagePack encodings enqueue_many's record head needs."""
import struct


def array_head(n):
    return bytes([0x90 | n]) if n < 16 else b"\xdc" + struct.pack(">H", n)


def str_head(n):
    """A str header: the record's strings are raw bytes under str types."""
    if n < 32:
        return bytes([0xA0 | n])
    if n < 256:
        return b"\xd9" + bytes([n])
    if n < 65536:
        return b"\xda" + struct.pack(">H", n)
    return b"\xdb" + struct.pack(">I", n)


def uint(v):
    if v < 128:
        return bytes([v])
    if v < 256:
        return b"\xcc" + bytes([v])
    if v < 65536:
        return b"\xcd" + struct.pack(">H", v)
    return b"\xce" + struct.pack(">I", v)
