"""The few MessagePack encodings enqueue_many's record head needs, and the
reading of a stored record that show's raw form gives."""
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


MAX_EXACT = 2 ** 53 - 1     # what the scripts' numbers (doubles) hold exactly
MAX_ATTEMPTS = 2 ** 31 - 1


class _Reader:
    """Reads values from bytes; any value not as asked raises ValueError."""

    def __init__(self, buf):
        self.buf, self.at = buf, 0

    def take(self, n):
        if n > len(self.buf) - self.at:
            raise ValueError("truncated")
        b = self.buf[self.at:self.at + n]
        self.at += n
        return b

    def tag(self):
        return self.take(1)[0]

    def str(self):
        """A str (never a bin: the scripts cannot read one)."""
        t = self.tag()
        if t & 0xE0 == 0xA0:
            n = t & 0x1F
        elif t in (0xD9, 0xDA, 0xDB):
            n = int.from_bytes(self.take(1 << (t - 0xD9)), "big")
        else:
            raise ValueError("not a str")
        return self.take(n)

    def int(self):
        """An integer the scripts hold exactly (a whole double too)."""
        t = self.tag()
        if t <= 0x7F:
            return t
        if t >= 0xE0:
            return t - 256
        if 0xCC <= t <= 0xCF:
            v = int.from_bytes(self.take(1 << (t - 0xCC)), "big")
        elif 0xD0 <= t <= 0xD3:
            v = int.from_bytes(self.take(1 << (t - 0xD0)), "big", signed=True)
        elif t in (0xCA, 0xCB):
            d = struct.unpack(">f" if t == 0xCA else ">d", self.take(4 if t == 0xCA else 8))[0]
            if not (-MAX_EXACT <= d <= MAX_EXACT) or d != int(d):
                raise ValueError("not a whole number")
            v = int(d)
        else:
            raise ValueError("not an integer")
        if not -MAX_EXACT <= v <= MAX_EXACT:
            raise ValueError("out of range")
        return v


def read_record(raw):
    """A stored record ("3:<attempts>:" and its MessagePack body) as a dict
    (attempts, type, payload, max, created, due, err, prio), by the scripts'
    rules (read_record in lib.lua) or stricter; None when it does not read
    so, and then the script's own answer is to be asked for."""
    try:
        head, sep, _ = raw[:13].partition(b":")
        digits_end = raw.find(b":", 2)
        if head != b"3" or not sep or digits_end < 3 or digits_end > 12:
            return None
        digits = raw[2:digits_end]
        if not digits.isdigit() or int(digits) > MAX_ATTEMPTS:
            return None
        r = _Reader(raw[digits_end + 1:])
        n = r.tag()
        if n not in (0x96, 0x97):
            return None
        jtype, payload, mx, created, offset = r.str(), r.str(), r.int(), r.int(), r.int()
        if mx < 0 or mx > MAX_ATTEMPTS or abs(created + offset) > MAX_EXACT:
            return None
        err = b""
        if r.buf[r.at:r.at + 1] == b"\xc0":
            r.at += 1
        else:
            err = r.str()
        prio = 5
        if n == 0x97:
            prio = r.int()
            if not 0 <= prio <= 9:
                return None
        if r.at != len(r.buf):
            return None
    except ValueError:
        return None
    return {"attempts": int(digits), "type": jtype, "payload": payload, "max": mx,
            "created": created, "due": created + offset, "err": err, "prio": prio}
