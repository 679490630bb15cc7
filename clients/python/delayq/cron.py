"""Recurring schedules' times, as libdelayq's src/util/cron.c: five-field
cron in the wall time of an IANA zone (Vixie cron's day rule, each wall
time once across daylight-saving changes), the @ macros, and @every.
schedule_add needs the first tick; the daemons compute the rest.
"""
import os
import re
from datetime import datetime, timedelta, timezone

from .errors import InvalidError

EXPR_MAX = 128
SEARCH_DAYS = 8 * 366
MACROS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
          "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
          "@hourly": "0 * * * *"}
MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
FIELDS = [("minute", 0, 59, None), ("hour", 0, 23, None), ("day-of-month", 1, 31, None),
          ("month", 1, 12, MONTHS), ("day-of-week", 0, 7, DAYS)]
UNITS = {"ms": 1, "s": 1000, "m": 60000, "h": 3600000, "d": 86400000}
DURATION_MAX_MS = 3153600000000


class Expr:
    def __init__(self):
        self.every_ms = 0
        self.sets = []
        self.mday_star = self.wday_star = False


def _duration(s):
    if not s:
        raise ValueError("empty duration")
    total, parts = 0, 0
    if not re.fullmatch(r"(\d+[a-z]*)+", s):
        raise ValueError("expected a number (durations look like 500ms, 30s, 15m, 2h, 1d)")
    for num, unit in re.findall(r"(\d+)([a-z]*)", s):
        mult = UNITS.get(unit) if unit else (1000 if parts == 0 else 0)
        if not mult:
            raise ValueError("unknown unit (use ms, s, m, h or d)")
        total += int(num) * mult
        if total > DURATION_MAX_MS:
            raise ValueError("duration is too long (over 100 years)")
        parts += 1
    return total


def _value(s, f):
    name, lo, hi, names = f
    m = re.match(r"\d+", s)
    if m:
        v = int(m.group())
        if len(m.group()) > 4 or v < lo or v > hi:
            raise ValueError("%s is not in %d..%d" % (m.group(), lo, hi))
        return v, s[m.end():]
    if names and s[:3].lower() in names and not s[3:4].isalpha():
        return lo + names.index(s[:3].lower()), s[3:]
    raise ValueError("expected %s" % ("a number or a name" if names else "a number"))


def _item(s, f, bits):
    name, lo, hi, _ = f
    step, single = 1, False
    if s.startswith("*"):
        s = s[1:]
    else:
        single = True
        lo, s = _value(s, f)
        hi = lo
        if s.startswith("-"):
            single = False
            hi, s = _value(s[1:], f)
            if hi < lo:
                raise ValueError("range %d-%d runs backwards" % (lo, hi))
    if s.startswith("/"):
        if single:
            hi = f[2]
        if not s[1:].isdigit() or not 1 <= int(s[1:]) <= f[2]:
            raise ValueError('step "%s" is not a whole number in 1..%d' % (s[1:], f[2]))
        step, s = int(s[1:]), ""
    if s:
        raise ValueError('unexpected "%s"' % s)
    bits.update(range(lo, hi + 1, step))


def parse(s) -> Expr:
    if not isinstance(s, str) or len(s.encode()) > EXPR_MAX:
        raise InvalidError("expression is missing or longer than %d bytes" % EXPR_MAX)
    s = s.lstrip(" \t")
    e = Expr()
    if s.startswith("@"):
        if re.match(r"@every[ \t]", s):
            d = s[6:].lstrip(" \t")
            try:
                e.every_ms = _duration(d)
            except ValueError as why:
                raise InvalidError('@every "%s": %s' % (d, why)) from None
            if e.every_ms < 1000 or e.every_ms % 1000:
                raise InvalidError('@every "%s": the interval must be whole seconds, at least '
                                   '1s' % d)
            return e
        if s in MACROS:
            return parse(MACROS[s])
        raise InvalidError('"%s" is not one of @every DURATION, @hourly, @daily, @weekly, '
                           '@monthly, @yearly' % s)
    parts = re.split(r"[ \t]+", s.rstrip(" \t")) if s.strip(" \t") else []
    if len(parts) != 5:
        raise InvalidError("expected 5 fields (minute hour day-of-month month day-of-week), "
                           "got %s%d" % ("more than " if len(parts) > 5 else "",
                                         min(len(parts), 5)))
    for i, (text, f) in enumerate(zip(parts, FIELDS)):
        bits = set()
        try:
            for item in text.split(","):
                if not item:
                    raise ValueError("empty list item")
                _item(item, f, bits)
        except ValueError as why:
            raise InvalidError('field %d (%s) "%s": %s' % (i + 1, f[0], text, why)) from None
        if i == 4 and 7 in bits:
            bits.discard(7)
            bits.add(0)
        e.sets.append(bits)
    e.mday_star = parts[2].startswith("*")
    e.wday_star = parts[4].startswith("*")
    return e


def _zone(tz):
    if not tz or tz == "UTC":
        return timezone.utc
    from zoneinfo import ZoneInfo
    return ZoneInfo(tz)


def check_zone(tz):
    if not tz or tz == "UTC":
        return
    if len(tz) > 64 or tz.startswith("/") or ".." in tz or re.search(r"[ \t:,]", tz):
        raise InvalidError('time zone "%.64s" is not an IANA zone name (as Europe/Berlin)' % tz)
    d = os.environ.get("TZDIR") or "/usr/share/zoneinfo"
    path = os.path.join(d, tz)
    if not os.path.isfile(path):
        raise InvalidError('time zone "%s" is not in the system\'s tzdata (%s)' % (tz, path))


def _day_matches(e, d):
    if d.month not in e.sets[3]:
        return False
    wd = (d.weekday() + 1) % 7   # Sunday 0
    dom, dow = d.day in e.sets[2], wd in e.sets[4]
    if not e.mday_star and not e.wday_star:
        return dom or dow
    return dom and dow


def _wall_key(dt):
    return (dt.year, dt.month, dt.day, dt.hour, dt.minute)


def _instant(z, y, mo, d, h, mi):
    """Unix s of a wall minute: its first occurrence; a skipped one is the
    first minute after the jump."""
    want = (y, mo, d, h, mi)
    best = None
    for fold in (0, 1):
        t = datetime(y, mo, d, h, mi, tzinfo=z, fold=fold).timestamp()
        if _wall_key(datetime.fromtimestamp(t, z)) == want and (best is None or t < best):
            best = t
    if best is not None:
        return int(best)
    t = int(datetime(y, mo, d, h, mi, tzinfo=z).timestamp())
    t -= t % 60
    while _wall_key(datetime.fromtimestamp(t, z)) < want:
        t += 60
    while _wall_key(datetime.fromtimestamp(t - 60, z)) > want:
        t -= 60
    return t


def next_tick(e, tz, after_ms):
    """The first tick after `after_ms` (Unix ms), -1 if none in 8 years."""
    if e.every_ms:
        return after_ms + e.every_ms
    start_ms = (after_ms // 60000) * 60000 + 60000
    z = _zone(tz)
    start = start_ms // 1000
    frm = datetime.fromtimestamp(start, z)
    day0 = frm.date()
    for k in range(SEARCH_DAYS):
        day = day0 + timedelta(days=k)
        if not _day_matches(e, day):
            continue
        for h in sorted(e.sets[1]):
            if k == 0 and h < frm.hour:
                continue
            for mi in sorted(e.sets[0]):
                if k == 0 and h == frm.hour and mi < frm.minute:
                    continue
                t = _instant(z, day.year, day.month, day.day, h, mi)
                if t >= start:
                    return t * 1000
    return -1


def first_tick(e, tz, now_ms):
    if e.every_ms:
        return now_ms - now_ms % 1000 + e.every_ms
    return next_tick(e, tz, now_ms)
