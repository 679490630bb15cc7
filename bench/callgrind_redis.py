"""A private redis-server under callgrind, for the bench's instruction
counts (bench/drain-instructions.py, bench/producer-instructions.py): on
a unix socket in a temporary directory, its profile files there too."""
import os, subprocess, tempfile, time

import redis


def start(collect):
    """Start it with the callgrind options `collect` (what to count, and
    from when); return (process, client, directory) once it answers."""
    tmp = tempfile.mkdtemp()
    sock = os.path.join(tmp, 'r.sock')
    srv = subprocess.Popen(['valgrind', '--tool=callgrind', *collect,
                            '--callgrind-out-file=' + os.path.join(tmp, 'cg.%p'),
                            'redis-server', '--port', '0', '--unixsocket', sock,
                            '--save', '', '--appendonly', 'no'],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        if os.path.exists(sock):
            break
        time.sleep(0.05)
    r = redis.Redis(unix_socket_path=sock)
    for _ in range(100):
        try:
            r.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.1)
    return srv, r, tmp


def stop(srv):
    srv.terminate()
    srv.wait()
