/*
 * Fuzz target: the admin HTTP server (src/daemon/admin/http_admin.c) as a client
 * reaches it.  The request is parsed by libevent's evhttp and answered by
 * http_admin's dispatch (routes, 404, 405 for other methods); both run
 * here exactly as in delayqd, on a server made with http_admin_new on a
 * socket bound by admin_socket_bind, over a Unix socket instead of TCP.  The input is
 * sent as one connection's bytes, the client then shuts its side and reads
 * until the server closes.
 *
 * These must hold: the server answers with a status line ("HTTP/", in the
 * version the request named) or nothing at all, a request that reached a
 * route is answered, and the server closes the connection once the client
 * has.
 * (libevent itself is not built with the sanitizers or the fuzzer's
 * coverage: its parser is exercised, not explored.)
 */
#include <errno.h>
#include <event2/event.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "daemon/admin/http_admin.h"
#include "daemon/supervisor/admin_socket.h"
#include "fuzz.h"

#define REPLY_MAX 65536

static char sock_dir[] = "/tmp/delayq-fuzz-http.XXXXXX";
static struct sockaddr_un sock_addr;
static struct event_base *base;
static struct http_admin *server;

/* The exchange in progress. */
static struct {
    char reply[REPLY_MAX];
    size_t len;
    int closed;
    int routed;
} ex;

static int route_metrics(FILE *out, struct http_admin_header *extra, void *arg)
{
    (void)extra;
    (void)arg;
    ex.routed++;
    fputs("# TYPE delayq_up gauge\ndelayq_up 1\n", out);
    return 200;
}

/* With a header of its own, as the real routes add the figures' age. */
static int route_healthz(FILE *out, struct http_admin_header *extra, void *arg)
{
    (void)arg;
    ex.routed++;
    snprintf(extra->name, sizeof extra->name, "X-Delayq-Stats-Age");
    snprintf(extra->value, sizeof extra->value, "0.250");
    fputs("ok\n", out);
    return 200;
}

static const struct http_admin_route routes[] = {
    { "/metrics", "text/plain; version=0.0.4", route_metrics },
    { "/healthz", "text/plain; charset=utf-8", route_healthz },
};

static void stop_server(void)
{
    http_admin_free(server);
    event_base_free(base);
    unlink(sock_addr.sun_path);
    rmdir(sock_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    char err[256];
    (void)argc;
    (void)argv;
    signal(SIGPIPE, SIG_IGN);
    if (!mkdtemp(sock_dir)) {
        perror("fuzz_http_admin: mkdtemp");
        exit(1);
    }
    sock_addr.sun_family = AF_UNIX;
    snprintf(sock_addr.sun_path, sizeof sock_addr.sun_path, "%s/admin.sock", sock_dir);
    base = event_base_new();
    server = base ? http_admin_new(base, routes, 2, NULL) : NULL;
    int fd = server ? admin_socket_bind((const struct sockaddr *)&sock_addr,
                                        sizeof sock_addr, err, sizeof err) : -1;
    if (fd < 0 || http_admin_adopt(server, fd) < 0) {
        fprintf(stderr, "fuzz_http_admin: cannot start the server: %s\n",
                server ? err : "out of memory");
        exit(1);
    }
    atexit(stop_server);
    return 0;
}

static void on_client_readable(evutil_socket_t fd, short what, void *arg)
{
    char buf[4096];
    (void)what;
    (void)arg;
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
        size_t room = REPLY_MAX - ex.len;
        size_t take = (size_t)n < room ? (size_t)n : room;
        memcpy(ex.reply + ex.len, buf, take);
        ex.len += take;
    } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        ex.closed = 1;
    }
}

/* Send everything, letting the server read as the socket fills. */
static int send_all(int fd, const uint8_t *data, size_t size)
{
    while (size > 0) {
        ssize_t n = write(fd, data, size);
        if (n > 0) {
            data += n;
            size -= (size_t)n;
        } else if (n < 0 && errno == EAGAIN) {
            event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
        } else {
            return -1;  /* the server closed early: a refusal */
        }
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    memset(&ex, 0, sizeof ex);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    FUZZ_ASSERT(fd >= 0);
    FUZZ_ASSERT(connect(fd, (const struct sockaddr *)&sock_addr, sizeof sock_addr) == 0);
    struct event *rev = event_new(base, fd, EV_READ | EV_PERSIST, on_client_readable, NULL);
    FUZZ_ASSERT(rev && event_add(rev, NULL) == 0);
    if (send_all(fd, data, size) == 0)
        shutdown(fd, SHUT_WR);
    while (!ex.closed)
        FUZZ_ASSERT(event_base_loop(base, EVLOOP_ONCE) == 0);
    event_free(rev);
    close(fd);
    /* Let the server finish with its side of the connection. */
    event_base_loop(base, EVLOOP_NONBLOCK);
    if (ex.len > 0 && !(ex.len >= 12 && memcmp(ex.reply, "HTTP/", 5) == 0))
        fprintf(stderr, "reply: %.*s\n", (int)(ex.len < 200 ? ex.len : 200), ex.reply);
    if (ex.len > 0)
        FUZZ_ASSERT(ex.len >= 12 && memcmp(ex.reply, "HTTP/", 5) == 0);
    if (ex.routed)
        FUZZ_ASSERT(ex.len > 0);
    return 0;
}
