#include "daemon/supervisor/notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "daemon/log.h"

void notify_send(const char *state)
{
    const char *path = getenv("NOTIFY_SOCKET");
    if (!path || !*path)
        return;
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    size_t len = strlen(path);
    if (len >= sizeof sa.sun_path || (path[0] != '/' && path[0] != '@')) {
        log_warn("NOTIFY_SOCKET is not a usable socket path");
        return;
    }
    memcpy(sa.sun_path, path, len);
    if (path[0] == '@')
        sa.sun_path[0] = '\0';      /* the abstract namespace */
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return;
    socklen_t salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
    /* Never wait: the supervisor sends from its loop, and a full queue on
     * the other side must not stop its timeouts and respawns. */
    if (sendto(fd, state, strlen(state), MSG_NOSIGNAL | MSG_DONTWAIT,
               (struct sockaddr *)&sa, salen) < 0)
        log_warn("cannot notify systemd (%s): %s", state, strerror(errno));
    close(fd);
}

int64_t notify_watchdog_ms(void)
{
    const char *usec = getenv("WATCHDOG_USEC");
    const char *pid = getenv("WATCHDOG_PID");
    if (!usec || (pid && atol(pid) != (long)getpid()))
        return 0;
    long long us = atoll(usec);
    return us > 0 ? us / 2000 : 0;
}
