"""The `redis` group of a delayqd.conf, read as delayqd reads it.

A small strict reader of libconfig's syntax (settings `name = value;`,
groups `{}`, arrays `[]`, lists `()`, strings with escapes and adjacent
parts joined, integers, floats, booleans, the three comment styles), so
that a service and its daemon share one file.  Every problem is one line
"FILE:LINE: what" (ConfigError).
"""
import re

from .conn import Options, split_hostport
from .errors import ConfigError, InvalidError

_TOKEN = re.compile(r"""
    (?P<ws>[ \t\r\n]+) | (?P<comment>\#[^\n]*|//[^\n]*|/\*.*?\*/) |
    (?P<str>"(?:[^"\\\n]|\\.)*") |
    (?P<num>[-+]?(?:0[xX][0-9a-fA-F]+L{0,2}|(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][-+]?[0-9]+)?L{0,2})) |
    (?P<name>[A-Za-z*][-A-Za-z0-9_*]*) | (?P<punct>[=:;,{}\[\]()]) | (?P<include>@include)
""", re.X | re.S)


class Value:
    def __init__(self, kind, v, line):
        self.kind, self.v, self.line = kind, v, line   # kind: str int float bool group list


class _Parser:
    def __init__(self, path, text):
        self.path = path
        self.toks = []
        pos, line = 0, 1
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if not m:
                self.fail(line, "syntax error near \"%s\"" % text[pos:pos + 10].split("\n")[0])
            kind = m.lastgroup
            if kind == "include":
                self.fail(line, "@include is not read by the Python client: put the redis "
                          "group in this file")
            if kind not in ("ws", "comment"):
                self.toks.append((kind, m.group(), line))
            line += m.group().count("\n")
            pos = m.end()
        self.toks.append(("eof", "", line))
        self.i = 0

    def fail(self, line, msg):
        raise ConfigError("%s:%d: %s" % (self.path, line, msg))

    def peek(self):
        return self.toks[self.i]

    def take(self):
        t = self.toks[self.i]
        self.i += 1
        return t

    def expect(self, text):
        t = self.take()
        if t[1] != text:
            self.fail(t[2], 'expected "%s", found "%s"' % (text, t[1] or "end of file"))

    def settings(self, end):
        out = {}
        while self.peek()[1] != end and self.peek()[0] != "eof":
            kind, name, line = self.take()
            if kind != "name":
                self.fail(line, 'expected a setting name, found "%s"' % name)
            t = self.take()
            if t[1] not in ("=", ":"):
                self.fail(t[2], 'expected "=" after %s' % name)
            if name in out:
                self.fail(line, "setting %s appears twice" % name)
            out[name] = self.value()
            if self.peek()[1] in (";", ","):
                self.take()
        return out

    def value(self):
        kind, text, line = self.take()
        if text == "{":
            v = Value("group", self.settings("}"), line)
            self.expect("}")
            return v
        if text in ("[", "("):
            close = "]" if text == "[" else ")"
            items = []
            while self.peek()[1] != close:
                items.append(self.value())
                if self.peek()[1] == ",":
                    self.take()
                elif self.peek()[1] != close:
                    self.fail(self.peek()[2], 'expected "," or "%s"' % close)
            self.take()
            return Value("list", items, line)
        if kind == "str":
            s = _unescape(text[1:-1])
            while self.peek()[0] == "str":
                s += _unescape(self.take()[1][1:-1])
            return Value("str", s, line)
        if kind == "num":
            t = text.rstrip("L")
            if re.fullmatch(r"[-+]?0[xX][0-9a-fA-F]+", t):
                return Value("int", int(t, 16), line)
            if re.fullmatch(r"[-+]?[0-9]+", t):
                return Value("int", int(t), line)
            return Value("float", float(t), line)
        if kind == "name" and text.lower() in ("true", "false"):
            return Value("bool", text.lower() == "true", line)
        self.fail(line, 'expected a value, found "%s"' % (text or "end of file"))


def _unescape(s):
    esc = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "\\": "\\", '"': '"'}
    return re.sub(r"\\(x[0-9a-fA-F]{2}|.)",
                  lambda m: chr(int(m.group(1)[1:], 16)) if m.group(1)[0] == "x"
                  else esc.get(m.group(1), m.group(1)), s)


def parse_file(path):
    try:
        with open(path, "r", encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ConfigError("%s: cannot read: %s" % (path, e.strerror)) from None
    except UnicodeDecodeError:
        raise ConfigError("%s: not UTF-8 text" % path) from None
    p = _Parser(path, text)
    top = p.settings("")
    if p.peek()[0] != "eof":
        p.fail(p.peek()[2], 'unexpected "%s"' % p.peek()[1])
    return top


def read_secret(file, what):
    """The first line of a secret file (as delayqd's password_file)."""
    try:
        with open(file, "r", encoding="utf-8") as f:
            line = f.readline().rstrip("\r\n")
    except OSError as e:
        raise InvalidError("%s: cannot read %s: %s" % (what, file, e.strerror)) from None
    if not line:
        raise InvalidError("%s: %s is empty" % (what, file))
    return line


class _Reader:
    def __init__(self, path):
        self.path = path

    def fail(self, v, msg):
        raise ConfigError("%s:%d: %s" % (self.path, v.line, msg))

    def string(self, v, name):
        if v.kind != "str":
            self.fail(v, "%s: expected a string" % name)
        if not v.v:
            self.fail(v, "%s is empty" % name)
        return v.v

    def integer(self, v, name, lo, hi):
        if v.kind != "int":
            self.fail(v, "%s: expected an integer" % name)
        if not lo <= v.v <= hi:
            self.fail(v, "%s: %d is out of range (%d to %d)" % (name, v.v, lo, hi))
        return v.v

    def boolean(self, v, name):
        if v.kind != "bool":
            self.fail(v, "%s: expected true or false" % name)
        return v.v

    def duration(self, v, name, lo_ms):
        s = v.v if v.kind == "str" else None
        if s is None:
            self.fail(v, '%s: expected a duration string ("5s", "500ms")' % name)
        if re.fullmatch(r"[0-9]+", s):
            self.fail(v, '%s: "%s" has no unit (write "%ss" or "%sms")' % (name, s, s, s))
        m = re.fullmatch(r"([0-9]+)(ms|s|m|h|d)", s)
        if not m:
            self.fail(v, '%s: "%s" is not a duration (as "5s" or "500ms")' % (name, s))
        ms = int(m.group(1)) * {"ms": 1, "s": 1000, "m": 60000, "h": 3600000,
                                "d": 86400000}[m.group(2)]
        if ms < lo_ms or ms > 2**31 - 1:
            self.fail(v, "%s: %s is out of range" % (name, s))
        return ms

    def secret(self, v, name):
        try:
            return read_secret(self.string(v, name), name)
        except InvalidError as e:
            self.fail(v, str(e))

    def nodes(self, v, name, what):
        if v.kind != "list" or not v.v:
            self.fail(v, '%s: expected a list of "HOST:PORT"' % name)
        out = []
        for item in v.v:
            s = self.string(item, name)
            try:
                split_hostport(s, what)
            except InvalidError as e:
                self.fail(item, "%s: %s" % (name, e))
            out.append(s)
        return out


def load_redis_options(path) -> Options:
    """Options from the `redis` group of the file at `path` (ConfigError
    with FILE:LINE on anything delayqd would refuse too)."""
    top = parse_file(path)
    o = Options()
    g = top.get("redis")
    if g is None:
        return o
    rd = _Reader(path)
    if g.kind != "group":
        rd.fail(g, "redis: expected a group (redis = { ... };)")
    s = g.v
    for name in s:
        if name not in _KEYS:
            rd.fail(s[name], "unknown setting redis.%s" % name)
    for a, b in (("password", "password_file"), ("host", "unix_socket"), ("host", "sentinel"),
                 ("unix_socket", "sentinel")):
        if a in s and b in s:
            later = s[a] if s[a].line > s[b].line else s[b]
            rd.fail(later, "redis.%s and redis.%s are both set (keep one)" % (a, b))
    for name, v in s.items():
        _KEYS[name](rd, v, o)
    if o.user and not o.password:
        rd.fail(s["user"], "redis.user needs redis.password or redis.password_file")
    if "nodes" in s and not o.cluster:
        rd.fail(s["nodes"], "redis.nodes lists cluster nodes: it needs redis.cluster = true")
    if o.cluster:
        if "sentinel" in s:
            rd.fail(s["cluster"], "redis.cluster and redis.sentinel are both set")
        if "unix_socket" in s:
            rd.fail(s["cluster"], "redis.cluster needs TCP nodes, not redis.unix_socket")
        if o.db:
            rd.fail(s["db"], "redis.db must be 0 with redis.cluster")
    return o


def _set(attr, fn):
    def read(rd, v, o):
        setattr(o, attr, fn(rd, v, "redis." + attr))
    return read


def _prefix(rd, v, o):
    from .keys import check_prefix
    p = rd.string(v, "redis.prefix")
    try:
        o.prefix = check_prefix(p)
    except InvalidError as e:
        rd.fail(v, "redis.prefix: %s" % e)


def _durability(rd, v, o):
    d = rd.string(v, "redis.durability")
    if d not in ("local", "replicated"):
        rd.fail(v, 'redis.durability: "%s" is not "local" or "replicated"' % d)
    o.durability = d


def _sentinel(rd, v, o):
    if v.kind != "group":
        rd.fail(v, "redis.sentinel: expected a group { ... }")
    s = v.v
    for name in s:
        if name not in ("master", "nodes", "user", "password", "password_file"):
            rd.fail(s[name], "unknown setting 'redis.sentinel.%s'" % name)
    if "master" not in s or "nodes" not in s:
        rd.fail(v, "redis.sentinel needs master and nodes")
    o.sentinel_master = rd.string(s["master"], "redis.sentinel.master")
    o.sentinel_nodes = rd.nodes(s["nodes"], "redis.sentinel.nodes", "sentinel")
    if "user" in s:
        o.sentinel_user = rd.string(s["user"], "redis.sentinel.user")
    if "password" in s:
        o.sentinel_password = rd.string(s["password"], "redis.sentinel.password")
    if "password_file" in s:
        o.sentinel_password = rd.secret(s["password_file"], "redis.sentinel.password_file")
    if o.sentinel_user and not o.sentinel_password:
        rd.fail(s["user"], "redis.sentinel.user needs redis.sentinel.password or "
                "redis.sentinel.password_file")


def _tls(rd, v, o):
    if v.kind != "group":
        rd.fail(v, "redis.tls: expected a group { ... }")
    s = v.v
    o.tls = True
    for name, t in s.items():
        full = "redis.tls." + name
        if name == "enable":
            o.tls = rd.boolean(t, full)
        elif name == "verify":
            o.tls_verify = rd.boolean(t, full)
        elif name in ("ca_file", "ca_dir", "cert_file", "key_file", "server_name"):
            val = rd.string(t, full)
            if name != "server_name":
                import os
                ok = os.path.isdir(val) if name == "ca_dir" else os.access(val, os.R_OK)
                if not ok:
                    rd.fail(t, "%s: cannot read %s" % (full, val))
            setattr(o, "tls_" + name, val)
        else:
            rd.fail(t, "unknown setting 'redis.tls.%s'" % name)
    if ("cert_file" in s) != ("key_file" in s):
        rd.fail(s.get("cert_file") or s.get("key_file"),
                "redis.tls.cert_file and redis.tls.key_file go together")


_KEYS = {
    "host": _set("host", lambda rd, v, n: rd.string(v, n)),
    "port": _set("port", lambda rd, v, n: rd.integer(v, n, 1, 65535)),
    "unix_socket": _set("unix_socket", lambda rd, v, n: rd.string(v, n)),
    "user": _set("user", lambda rd, v, n: rd.string(v, n)),
    "password": _set("password", lambda rd, v, n: rd.string(v, n)),
    "password_file": lambda rd, v, o: setattr(o, "password",
                                              rd.secret(v, "redis.password_file")),
    "db": _set("db", lambda rd, v, n: rd.integer(v, n, 0, 2**31 - 1)),
    "prefix": _prefix,
    "connect_timeout": lambda rd, v, o: setattr(o, "connect_timeout_ms",
                                                rd.duration(v, "redis.connect_timeout", 1)),
    "command_timeout": lambda rd, v, o: setattr(o, "command_timeout_ms",
                                                rd.duration(v, "redis.command_timeout", 0)),
    "keepalive": _set("keepalive", lambda rd, v, n: rd.boolean(v, n)),
    "max_payload": _set("max_payload", lambda rd, v, n: rd.integer(v, n, 1, 512 * 1024 * 1024)),
    "durability": _durability,
    "replication_timeout": lambda rd, v, o: setattr(
        o, "replication_timeout_ms", rd.duration(v, "redis.replication_timeout", 1)),
    "sentinel": _sentinel,
    "cluster": _set("cluster", lambda rd, v, n: rd.boolean(v, n)),
    "nodes": lambda rd, v, o: setattr(o, "nodes", rd.nodes(v, "redis.nodes", "cluster node")),
    "tls": _tls,
}
