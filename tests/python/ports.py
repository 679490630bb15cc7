"""Free TCP ports of 127.0.0.1 for the tests' servers (stdlib only: the
browser test uses it too)."""
import random
import socket


_GIVEN = set()


def free_port():
    """A loopback TCP port nothing holds now, from below the kernel's
    ephemeral range: a port from that range can become the local port of
    any connection opened before the server binds it."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    for _ in range(200 if low - 15000 >= 1000 else 0):
        port = random.randrange(15000, low)
        if port in _GIVEN:      # a test takes several before it binds them
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                _GIVEN.add(port)
                return port
            except OSError:
                continue
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
