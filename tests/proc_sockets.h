/*
 * A process's sockets as /proc shows them, for the tests that assert what
 * a process is connected to: its descriptors (/proc/PID/fd) looked up in
 * /proc/net/tcp, tcp6 and unix.  Linux only; nothing here depends on
 * Check.
 */
#ifndef DQ_TEST_PROC_SOCKETS_H
#define DQ_TEST_PROC_SOCKETS_H

#include <stddef.h>
#include <sys/types.h>

/* What a process's sockets say: how many TCP sockets are not listeners
 * (connected, or connecting), how many of those have a remote port in the
 * ports asked about, and how many unix sockets have a path; each
 * described in `why` (" tcp :LOCAL->:REMOTE (state NN);", " unix PATH;"). */
struct sockets_seen {
    int connected, to_ports, named_unix;
    char why[1024];
};

/* Look at pid's sockets; `ports` (nports of them) are the remote ports
 * counted in to_ports. */
void ps_look_at_sockets(pid_t pid, const int *ports, size_t nports, struct sockets_seen *seen);

/* Connections from pid's children to `port` (a remote port). */
int ps_children_connected_to(pid_t pid, int port);

#endif
