"""The Lua scripts, as the build generated them from src/scripts.

The texts are never written by hand: `make` puts the build tree's
scripts/NAME.lua (the shared prelude included, exactly as libdelayq
embeds them) into this package's scripts/ directory, and the package
loads them from there.  DELAYQ_SCRIPTS_DIR overrides the directory.
"""
import hashlib
import os

from .errors import RedisError

_DIR = os.environ.get("DELAYQ_SCRIPTS_DIR") or os.path.join(os.path.dirname(__file__),
                                                            "scripts")


class Script:
    """One script: its name, text and SHA1 digest (what EVALSHA names)."""

    def __init__(self, name, text):
        self.name = name
        self.text = text
        self.sha = hashlib.sha1(text).hexdigest()
        # Under durability "replicated" a script that writes is followed by
        # WAIT; a read-only one starts with this shebang (as libdelayq tells).
        self.writes = not text.startswith(b"#!lua flags=no-writes")


_cache = {}


def get(name) -> Script:
    s = _cache.get(name)
    if s is None:
        path = os.path.join(_DIR, name + ".lua")
        try:
            with open(path, "rb") as f:
                s = Script(name, f.read())
        except OSError as e:
            raise RedisError("delayq script %s is missing from the package (%s): "
                             "the package was not built with make" % (name, e)) from None
        _cache[name] = s
    return s


def directory() -> str:
    return _DIR
