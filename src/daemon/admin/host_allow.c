#include "daemon/admin/host_allow.h"

#include <arpa/inet.h>
#include <event2/bufferevent.h>
#include <netinet/in.h>
#include <string.h>
#include <strings.h>

#define NAME_MAX_LEN 256

/* The address of `ss` as text (IPv6 without brackets) into out; "" for
 * another family or an unspecified address (0.0.0.0, ::), which no
 * client names. */
static void addr_text(const struct sockaddr_storage *ss, char *out, size_t len)
{
    out[0] = '\0';
    if (ss->ss_family == AF_INET) {
        const struct in_addr *a = &((const struct sockaddr_in *)ss)->sin_addr;
        if (a->s_addr != htonl(INADDR_ANY))
            inet_ntop(AF_INET, a, out, (socklen_t)len);
    } else if (ss->ss_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;
        if (!IN6_IS_ADDR_UNSPECIFIED(a))
            inet_ntop(AF_INET6, a, out, (socklen_t)len);
    }
}

/* The name part of "name[:port]" or "[v6][:port]" into out (brackets
 * dropped); -1 when it is not of that form or too long. */
static int name_of(const char *hostport, size_t n, char *out, size_t outlen)
{
    const char *name = hostport, *end;
    if (n > 0 && hostport[0] == '[') {
        name++;
        end = memchr(hostport, ']', n);
        if (!end || (end + 1 < hostport + n && end[1] != ':'))
            return -1;
    } else {
        end = memchr(hostport, ':', n);
        if (!end)
            end = hostport + n;
    }
    const char *port = end + (hostport[0] == '[');
    if (port < hostport + n
        && strspn(port + 1, "0123456789") != (size_t)(hostport + n - port - 1))
        return -1;
    size_t len = (size_t)(end - name);
    if (len == 0 || len >= outlen)
        return -1;
    memcpy(out, name, len);
    out[len] = '\0';
    return 0;
}

/* Whether `name` (no port, no brackets) is one of the set's. */
static int name_allowed(const struct host_allow *set, int fd, const char *name)
{
    if (strcasecmp(name, "localhost") == 0)
        return 1;
    char addr[INET6_ADDRSTRLEN];
    if (set->listen) {
        addr_text(set->listen, addr, sizeof addr);
        if (addr[0] && strcasecmp(name, addr) == 0)
            return 1;
    }
    struct sockaddr_storage local;
    socklen_t len = sizeof local;
    if (fd >= 0 && getsockname(fd, (struct sockaddr *)&local, &len) == 0) {
        addr_text(&local, addr, sizeof addr);
        if (addr[0] && strcasecmp(name, addr) == 0)
            return 1;
    }
    for (size_t i = 0; i < set->nnames; i++)
        if (strcasecmp(name, set->names[i]) == 0)
            return 1;
    return 0;
}

int host_allow_host(const struct host_allow *set, int fd, const char *hostport)
{
    char name[NAME_MAX_LEN];
    if (!hostport || name_of(hostport, strlen(hostport), name, sizeof name) < 0)
        return 0;
    return name_allowed(set, fd, name);
}

int host_allow_origin(const struct host_allow *set, int fd, const char *origin)
{
    if (!origin)
        return 0;
    const char *rest = NULL;
    if (strncasecmp(origin, "http://", 7) == 0)
        rest = origin + 7;
    else if (strncasecmp(origin, "https://", 8) == 0)
        rest = origin + 8;
    if (!rest || strchr(rest, '/'))
        return 0;
    return host_allow_host(set, fd, rest);
}

int host_allow_fd(struct evhttp_request *req)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
    return bev ? (int)bufferevent_getfd(bev) : -1;
}
