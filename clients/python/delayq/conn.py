"""The connection to Redis (one server, Sentinel or Cluster) and running
the scripts: EVALSHA, SCRIPT LOAD and once more on NOSCRIPT, WAIT after
writes under durability "replicated", and every failure as a delayq.Error
with libdelayq's message.
"""
import logging
import os
import re
import ssl
import time
from dataclasses import dataclass, field
from typing import List, Optional

import redis
import redis.exceptions as rex

from . import errors
from . import scripts as _scripts

DEFAULT_REPLICATION_TIMEOUT_MS = 1000


@dataclass
class Options:
    """What libdelayq's dq_options holds, with its defaults."""
    host: str = "127.0.0.1"
    port: int = 6379
    unix_socket: Optional[str] = None
    user: Optional[str] = None
    password: Optional[str] = None
    db: int = 0
    prefix: str = "dq"
    connect_timeout_ms: int = 5000
    command_timeout_ms: int = 5000
    keepalive: bool = True
    max_payload: int = 1024 * 1024
    durability: str = "local"
    replication_timeout_ms: int = DEFAULT_REPLICATION_TIMEOUT_MS
    tls: bool = False
    tls_ca_file: Optional[str] = None
    tls_ca_dir: Optional[str] = None
    tls_cert_file: Optional[str] = None
    tls_key_file: Optional[str] = None
    tls_server_name: Optional[str] = None
    tls_verify: bool = True
    sentinel_master: Optional[str] = None
    sentinel_nodes: List[str] = field(default_factory=list)
    sentinel_user: Optional[str] = None
    sentinel_password: Optional[str] = None
    cluster: bool = False
    nodes: List[str] = field(default_factory=list)

    def address(self) -> str:
        if self.sentinel_master:
            return "sentinel master %s" % self.sentinel_master
        if self.unix_socket:
            return self.unix_socket
        return "%s:%d" % (self.host, self.port)


def split_hostport(s, what):
    host, sep, port = s.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise errors.InvalidError('%s "%s" is not HOST:PORT' % (what, s))
    return host.strip("[]"), int(port)


def _kwargs(o: Options):
    kw = dict(username=o.user, password=o.password,
              socket_connect_timeout=o.connect_timeout_ms / 1000.0,
              socket_timeout=(o.command_timeout_ms / 1000.0) if o.command_timeout_ms else None)
    if o.durability == "replicated" and kw["socket_timeout"]:
        kw["socket_timeout"] += o.replication_timeout_ms / 1000.0
    if o.tls and not o.unix_socket:
        if o.tls_server_name and o.tls_server_name != o.host and o.tls_verify:
            raise errors.InvalidError(
                "redis.tls.server_name: the Python client checks the host's own name "
                "(redis-py 4.3 has no separate server name); connect by that name")
        kw.update(ssl=True, ssl_ca_certs=o.tls_ca_file, ssl_ca_path=o.tls_ca_dir,
                  ssl_certfile=o.tls_cert_file, ssl_keyfile=o.tls_key_file,
                  ssl_cert_reqs="required" if o.tls_verify else "none",
                  ssl_check_hostname=bool(o.tls_verify))
    return kw


def open_redis(o: Options):
    """A redis-py client for the options (nothing is sent yet)."""
    kw = _kwargs(o)
    if o.cluster:
        from redis.cluster import ClusterNode, RedisCluster
        seeds = o.nodes or ["%s:%d" % (o.host, o.port)]
        nodes = [ClusterNode(*split_hostport(s, "cluster node")) for s in seeds]
        return RedisCluster(startup_nodes=nodes, **kw)
    if o.sentinel_master:
        from redis.sentinel import Sentinel
        sents = [split_hostport(s, "sentinel") for s in o.sentinel_nodes]
        skw = {k: v for k, v in kw.items() if k not in ("username", "password")}
        skw.update(username=o.sentinel_user, password=o.sentinel_password)
        return Sentinel(sents, sentinel_kwargs=skw, **kw).master_for(o.sentinel_master, db=o.db)
    if o.unix_socket:
        kw = {k: v for k, v in kw.items() if not k.startswith("ssl")}
        return redis.Redis(unix_socket_path=o.unix_socket, db=o.db, **kw)
    return redis.Redis(host=o.host, port=o.port, db=o.db,
                       socket_keepalive=o.keepalive, **kw)


def _strerror(e):
    m = re.match(r"Error (\d+) ", str(e))
    if m:
        return os.strerror(int(m.group(1)))
    m = re.match(r"Error (?:\d+ )?connecting to [^.]*\. (.*)", str(e))
    return (m.group(1) if m else str(e)).rstrip(".")


def translate(o: Options, e, what):
    """The delayq.Error for a redis-py exception met running `what`."""
    addr = o.address()
    if isinstance(e, errors.Error):
        return e
    if isinstance(e, rex.AuthenticationError) or (
            isinstance(e, rex.ResponseError) and str(e).startswith(("WRONGPASS", "NOAUTH",
                                                                     "invalid username"))):
        msg = str(e)
        if not msg.startswith(("WRONGPASS", "NOAUTH")):
            msg = "WRONGPASS " + msg
        return errors.AuthError("redis refused AUTH: %s" % msg)
    if isinstance(e, rex.TimeoutError):
        return errors.TimeoutError("redis %s: %s timed out" % (addr, what))
    if isinstance(e, (rex.ConnectionError, OSError, ssl.SSLError)):
        if "Connection closed by server" in str(e):
            return errors.ConnectError("redis %s: connection closed by server" % addr)
        return errors.ConnectError("cannot connect to redis at %s: %s" % (addr, _strerror(e)))
    if isinstance(e, rex.ResponseError):
        return errors.RedisError("redis error in %s: %s" % (what, e))
    return errors.RedisError("redis error in %s: %s" % (what, e))


# redis-py's ConnectionErrors that are not a node out of reach: refused
# credentials (the call's own error) and LOADING (each call's, waited out).
_REFUSED = tuple(getattr(rex, n) for n in ("AuthenticationError", "AuthorizationError")
                 if hasattr(rex, n))


def _failover_reply(rep):
    """A pipelined call's reply that says it ran nothing on a replica, a
    server still loading, or a cluster node that does not serve its slot
    yet (a master restarted answers CLUSTERDOWN until it has met the
    others)."""
    return isinstance(rep, Exception) and not isinstance(rep, errors.Error) and (
        _failover(rep) or isinstance(rep, rex.ClusterDownError)
        or str(rep).startswith("CLUSTERDOWN"))


def _failover(e):
    return isinstance(e, (rex.ReadOnlyError, rex.BusyLoadingError)) or (
        isinstance(e, rex.ResponseError) and str(e).startswith(("READONLY", "MASTERDOWN",
                                                                  "LOADING")))


class Conn:
    """The client's Redis and how each call reaches it."""

    def __init__(self, o: Options):
        self.o = o
        self.r = open_redis(o)
        self.cluster = o.cluster
        self.map_stale = False      # a master was out of reach: read the slots again
        self.map_read_at = 0.0      # time.monotonic() of the last read

    def close(self):
        try:
            self.r.close()
        except Exception:  # closing never fails the caller
            pass

    def _wait(self, key):
        """WAIT 1 timeout on the node that holds `key` (cluster) or on the
        connection's server: the last write is on a replica, or TimeoutError."""
        t = self.o.replication_timeout_ms
        if self.cluster:
            node = self.r.get_node_from_key(key)
            n = self.r.execute_command("WAIT", 1, t, target_nodes=node)
        else:
            n = self.r.execute_command("WAIT", 1, t)
        if not isinstance(n, int) or n < 1:
            raise errors.TimeoutError("not replicated within %d ms (the write is on the "
                                      "master only)" % t)

    def _load(self, s, key):
        if self.cluster:
            node = self.r.get_node_from_key(key)
            self.r.execute_command("SCRIPT LOAD", s.text, target_nodes=node)
        else:
            self.r.execute_command("SCRIPT LOAD", s.text)

    def _retrying(self, fn, what):
        """Run fn(); a failover reply (READONLY, MASTERDOWN, LOADING) ran
        nothing: connect again after a backoff for up to the connect
        timeout, as libdelayq does."""
        waited, backoff = 0, 100
        while True:
            try:
                return fn()
            except errors.Error:
                raise
            except Exception as e:  # redis-py's, turned into delayq's below
                if not _failover(e) or waited >= self.o.connect_timeout_ms:
                    if _failover(e):
                        raise errors.ConnectError("redis %s: %s (no master within %d ms)"
                                                  % (self.o.address(), e, waited)) from None
                    raise translate(self.o, e, what) from None
                try:
                    self.r.connection_pool.disconnect()
                except Exception:
                    pass
                time.sleep(backoff / 1000.0)
                waited += backoff
                backoff = min(backoff * 2, 2000)

    def run(self, name, keys, args):
        """EVALSHA of script `name`; SCRIPT LOAD and again on NOSCRIPT; WAIT
        after a write under durability "replicated"."""
        s = _scripts.get(name)
        if self.cluster:
            # by the master of the keys, as a pipeline of one (redis-py's
            # cluster client logs every NOSCRIPT as an exception)
            reply = self.run_many(name, [(keys, args)])[0]
            if isinstance(reply, Exception):
                raise translate(self.o, reply, name)
            return reply

        def once():
            try:
                reply = self.r.evalsha(s.sha, len(keys), *keys, *args)
            except rex.NoScriptError:
                self._load(s, keys[0])
                reply = self.r.evalsha(s.sha, len(keys), *keys, *args)
            if s.writes and self.o.durability == "replicated":
                self._wait(keys[0])
            return reply
        return self._retrying(once, name)

    def command(self, *args, what=None):
        return self._retrying(lambda: self.r.execute_command(*args), what or args[0])

    def _send_by_node(self, s, batch):
        """A cluster's pipeline: the calls grouped by the master that holds
        their keys, one round trip to each (redis-py 4.3's own cluster
        pipeline refuses EVALSHA).  A call that met MOVED, ASK, TRYAGAIN
        or CLUSTERDOWN ran nothing: the slot map is read again and those
        calls are sent again, a few times.  The masters answer on their
        own: the calls of one out of reach get its delayq.ConnectError (or
        TimeoutError) and the others their replies, as in libdelayq."""
        if self.map_stale and time.monotonic() - self.map_read_at >= 1.0:
            # Its replica may have been promoted since: read the map again,
            # at most once a second while a master stays out of reach.
            self._read_map()
        replies = [None] * len(batch)
        todo = list(range(len(batch)))
        for attempt in range(5):
            groups = {}
            for i in todo:
                node = self.r.get_node_from_key(batch[i][0][0])
                groups.setdefault(node.name, (node, []))[1].append(i)
            for node, idx in groups.values():
                for i, rep in zip(idx, self._node_pipeline(node, s, [batch[i] for i in idx])):
                    replies[i] = rep
            todo = [i for i in todo if isinstance(replies[i], (rex.MovedError, rex.AskError,
                                                                rex.TryAgainError,
                                                                rex.ClusterDownError))]
            if not todo:
                break
            time.sleep(0.05 * (attempt + 1))
            self._read_map()
        return replies

    def _read_map(self):
        """The slot map read again; a node out of reach is tried and
        passed over without redis-py logging its traceback."""
        self.map_stale = False
        self.map_read_at = time.monotonic()
        lg = logging.getLogger("redis.cluster")
        was = lg.disabled
        lg.disabled = True
        try:
            self.r.nodes_manager.initialize()
        except Exception:
            pass        # the calls meet the old map's answers: MOVED, or a node down
        finally:
            lg.disabled = was

    def _node_pipeline(self, node, s, calls):
        """The replies of `calls` sent in one pipeline to the master `node`;
        when it cannot be reached, its error for each (and its connections
        closed, so that the next call connects again): ConnectError (when
        the connection broke after they were sent, they may have run, as
        in libdelayq), or TimeoutError when it stopped answering; LOADING
        (its data still loading) for each, sent again by run_many.  Refused
        credentials are the call's own error, raised (AuthError)."""
        try:
            p = node.redis_connection.pipeline(transaction=False)
            for keys, args in calls:
                p.evalsha(s.sha, len(keys), *keys, *args)
            return p.execute(raise_on_error=False)
        except _REFUSED:
            raise
        except rex.BusyLoadingError as e:
            # redis-py raises a LOADING reply out of the pipeline: each
            # call's reply, so that only this master's are sent again.  (A
            # master that began loading within the pipeline, DEBUG RELOAD,
            # ran the calls before it: those are sent again too.  A master
            # restarted answers LOADING to every call.)
            return [e] * len(calls)
        except (rex.ConnectionError, rex.TimeoutError, OSError) as e:
            self.map_stale = True
            try:
                node.redis_connection.connection_pool.disconnect()
            except Exception:
                pass
            if isinstance(e, rex.TimeoutError):
                err = errors.TimeoutError("redis %s: %s timed out" % (node.name, s.name))
            else:
                err = errors.ConnectError("cannot connect to redis at %s: %s"
                                          % (node.name, _strerror(e)))
            return [err] * len(calls)

    def run_many(self, name, calls):
        """Pipeline the calls [(keys, args)] of one script: one round trip
        (per master, in a cluster); the scripts missing after a restart are
        loaded and those calls sent again.  Returns the replies, an error
        reply as a redis-py exception object.  A READONLY, MASTERDOWN,
        LOADING or CLUSTERDOWN reply ran nothing: the calls are sent again after a
        backoff, for up to the connect timeout.  On a single server (or
        Sentinel's master) that is the whole batch, as its server changed
        under it; on a cluster only the calls that got one, as the other
        masters ran theirs (sent again, their jobs of generated ids would
        be added twice); after the timeout those get a delayq.ConnectError."""
        s = _scripts.get(name)
        if not self.cluster:
            def once():
                replies = self._send_loaded(s, calls)
                for rep in replies:
                    if _failover_reply(rep):
                        raise rep
                self._wait_written(s, calls, replies)
                return replies
            return self._retrying(once, name)
        replies = self._retrying(lambda: self._send_loaded(s, calls), name)
        waited, backoff = 0, 100
        pending = [i for i, rep in enumerate(replies) if _failover_reply(rep)]
        while pending:
            if waited >= self.o.connect_timeout_ms:
                for i in pending:
                    replies[i] = errors.ConnectError("redis master of %s: %s: %s (still after "
                                                     "%d ms)" % (calls[i][0][0],
                                                                type(replies[i]).__name__,
                                                                replies[i], waited))
                break
            # The slot map read again first: a replica may be promoted.
            self.map_stale, self.map_read_at = True, 0.0
            time.sleep(backoff / 1000.0)
            waited += backoff
            backoff = min(backoff * 2, 2000)
            again = self._retrying(lambda: self._send_loaded(s, [calls[i] for i in pending]),
                                   name)
            for i, rep in zip(pending, again):
                replies[i] = rep
            pending = [i for i in pending if _failover_reply(replies[i])]
        self._retrying(lambda: self._wait_written(s, calls, replies), "WAIT")
        return replies

    def _wait_written(self, s, calls, replies):
        """Under durability "replicated", WAIT once on each server that ran
        a call of a script that writes (a partitioned queue's calls have
        keys of several partitions, many of them on one server), as
        libdelayq and the Node client do."""
        if not (s.writes and self.o.durability == "replicated"):
            return
        keys = {c[0][0] for c, rep in zip(calls, replies) if not isinstance(rep, Exception)}
        by_server = {}
        for k in sorted(keys):
            by_server.setdefault(self.r.get_node_from_key(k).name if self.cluster else "", k)
        for k in by_server.values():
            self._wait(k)

    def _send_loaded(self, s, batch):
        """The replies of one pipeline of `batch` (per master, in a
        cluster), the calls refused with NOSCRIPT sent again once their
        master has the script."""
        replies = self._send(s, batch)
        missing = [i for i, rep in enumerate(replies) if isinstance(rep, rex.NoScriptError)
                   or (isinstance(rep, rex.ResponseError) and str(rep).startswith("NOSCRIPT"))]
        if missing:
            failed = {}
            for k in {batch[i][0][0] for i in missing}:
                try:
                    self._load(s, k)
                except _REFUSED:
                    raise
                except Exception as e:  # redis-py's
                    if not self.cluster:
                        raise
                    # Only this master's calls fail (or wait, for LOADING):
                    # the others' ran already.
                    failed[k] = e if _failover(e) else translate(self.o, e, "SCRIPT LOAD")
            for i in missing:
                if batch[i][0][0] in failed:
                    replies[i] = failed[batch[i][0][0]]
            again = [i for i in missing if batch[i][0][0] not in failed]
            for i, rep in zip(again, self._send(s, [batch[i] for i in again])):
                replies[i] = rep
        return replies

    def _send(self, s, batch):
        if self.cluster:
            return self._send_by_node(s, batch)
        p = self.r.pipeline(transaction=False)
        for keys, args in batch:
            p.evalsha(s.sha, len(keys), *keys, *args)
        return p.execute(raise_on_error=False)
