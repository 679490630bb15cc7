/*
 * admin_socket: the admin listening socket (metrics.listen), bound by the
 * supervisor and never accepted on there.  The supervisor holds it for
 * the daemon's life and hands it to each admin process it forks, so that
 * a restart of the admin process never gives the port up, and connections
 * that come meanwhile wait in the kernel's backlog for the next one.
 */
#ifndef DQ_ADMIN_SOCKET_H
#define DQ_ADMIN_SOCKET_H

#include <stddef.h>
#include <sys/socket.h>

/* A non-blocking, close-on-exec listening socket on `addr`; -1 with the
 * failing step and errno's text in err. */
int admin_socket_bind(const struct sockaddr *addr, socklen_t addrlen, char *err,
                      size_t errlen);

#endif
