#include "daemon/supervisor/admin_socket.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define BACKLOG 64

int admin_socket_bind(const struct sockaddr *addr, socklen_t addrlen, char *err,
                      size_t errlen)
{
    const char *step = "socket";
    int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        goto fail;
    int one = 1;
    step = "setsockopt";
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0)
        goto fail;
    if (addr->sa_family == AF_INET6
        && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) < 0)
        goto fail;
    step = "bind";
    if (bind(fd, addr, addrlen) < 0)
        goto fail;
    step = "listen";
    if (listen(fd, BACKLOG) < 0)
        goto fail;
    return fd;
fail:;
    int saved = errno;
    snprintf(err, errlen, "%s: %s", step, strerror(saved));
    if (fd >= 0)
        close(fd);
    errno = saved;
    return -1;
}
