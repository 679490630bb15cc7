/*
 * The daemon's Redis connection bytes over a bufferevent (see rconn_io.h).
 */
#include "redis/rconn_io.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/util.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#define KEEPALIVE_INTERVAL_S 15 /* hiredis's REDIS_KEEPALIVE_INTERVAL */

struct pending {
    struct pending *next;
    rconn_io_reply_fn fn;
    void *privdata;
    int persistent;
};

struct rconn_io {
    const struct redis_conn_opts *opt;
    struct bufferevent *bev;
    SSL *ssl;                   /* owned by bev; NULL when plain */
    redisReader *reader;
    struct pending *head, *tail;
    struct rconn_io_events ev;
    int connected;              /* on_connect(ok 1) was called */
    int got_data;               /* a reply came */
    int in_callback;            /* depth of callbacks running */
    int closing;                /* no more sends; freed when callbacks end */
    int free_requested;         /* rconn_io_free was called in a callback */
};

/* ---- replies ---------------------------------------------------------------- */

/* Every pending callback gets a NULL reply (the connection is going). */
static void fail_pending(struct rconn_io *io)
{
    struct pending *p;
    while ((p = io->head) != NULL) {
        io->head = p->next;
        if (p->fn)
            p->fn(io, NULL, p->privdata);
        free(p);
    }
    io->tail = NULL;
}

static void destroy(struct rconn_io *io)
{
    if (io->bev)
        bufferevent_free(io->bev); /* frees the SSL object too */
    if (io->reader)
        redisReaderFree(io->reader);
    free(io);
}

/*
 * The connection failed: pending callbacks get NULL, then on_connect(0)
 * or on_disconnect says why, then it is freed, unless a callback further
 * up the stack is still running (that one frees it on return).
 */
static void fail(struct rconn_io *io, const char *why)
{
    if (io->closing)
        return;
    io->closing = 1;
    io->in_callback++;
    fail_pending(io);
    if (!io->free_requested) {
        if (io->connected && io->ev.on_disconnect)
            io->ev.on_disconnect(io, why, io->ev.arg);
        else if (!io->connected && io->ev.on_connect)
            io->ev.on_connect(io, 0, why, io->ev.arg);
    }
    if (--io->in_callback == 0)
        destroy(io);
    else
        io->free_requested = 1;
}

/* Hand one reply to the callback at the head of the FIFO. */
static void dispatch(struct rconn_io *io, redisReply *reply)
{
    struct pending *p = io->head;
    if (p && !p->persistent) {
        io->head = p->next;
        if (!io->head)
            io->tail = NULL;
    }
    if (p && p->fn)
        p->fn(io, reply, p->privdata);
    if (p && !p->persistent)
        free(p);
    freeReplyObject(reply);
}

static void on_read(struct bufferevent *bev, void *arg)
{
    struct rconn_io *io = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    size_t n;
    while ((n = evbuffer_get_length(in)) > 0) {
        struct evbuffer_iovec v;
        if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
            break;
        if (redisReaderFeed(io->reader, v.iov_base, v.iov_len) != REDIS_OK)
            break;
        evbuffer_drain(in, v.iov_len);
        io->got_data = 1;
    }
    io->in_callback++;
    while (!io->closing && !io->free_requested) {
        void *reply = NULL;
        if (redisReaderGetReply(io->reader, &reply) != REDIS_OK) {
            char why[200];
            snprintf(why, sizeof why, "protocol error: %s", io->reader->errstr);
            io->in_callback--;
            fail(io, why);
            return;
        }
        if (!reply)
            break;
        dispatch(io, reply);
    }
    if (--io->in_callback == 0 && io->free_requested)
        rconn_io_free(io);
}

/* ---- connecting and errors ---------------------------------------------------- */

/* Why the bufferevent failed: the TLS cause by tls.c, else the socket's. */
static void describe_error(struct rconn_io *io, short what, char *why, size_t len)
{
    int sys = EVUTIL_SOCKET_ERROR();
    unsigned long code = io->ssl ? bufferevent_get_openssl_error(io->bev) : 0;
    while (io->ssl && bufferevent_get_openssl_error(io->bev))
        ; /* one cause is enough */
    int closed = (what & BEV_EVENT_EOF) || sys == ECONNRESET || sys == EPIPE;
    if (io->ssl && io->connected && !io->got_data && !code && closed)
        tls_describe_early_close(&io->opt->tls, why, len);
    else if (io->ssl && (code || !io->connected))
        tls_describe_code(io->ssl, &io->opt->tls, io->opt->host, code,
                          (what & BEV_EVENT_EOF) ? 0 : sys, why, len);
    else if (what & BEV_EVENT_EOF)
        snprintf(why, len, "connection closed by server");
    else
        snprintf(why, len, "%s", evutil_socket_error_to_string(sys));
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    struct rconn_io *io = arg;
    if (what & BEV_EVENT_CONNECTED) {
        io->connected = 1;
        io->in_callback++;
        if (io->ev.on_connect)
            io->ev.on_connect(io, 1, NULL, io->ev.arg);
        if (--io->in_callback == 0 && io->free_requested)
            rconn_io_free(io);
        return;
    }
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
        char why[400];
        describe_error(io, what, why, sizeof why);
        fail(io, why);
    }
}

/* The address of `o` in *ss; 0, or -1 with err set. */
static int resolve(const struct redis_conn_opts *o, struct sockaddr_storage *ss,
                   socklen_t *sslen, char *err, size_t errlen)
{
    memset(ss, 0, sizeof *ss);
    if (o->unix_path) {
        struct sockaddr_un *un = (struct sockaddr_un *)ss;
        un->sun_family = AF_UNIX;
        snprintf(un->sun_path, sizeof un->sun_path, "%s", o->unix_path);
        *sslen = sizeof *un;
        return 0;
    }
    struct evutil_addrinfo hints = { 0 }, *ai = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    char port[16];
    snprintf(port, sizeof port, "%d", o->port);
    int r = evutil_getaddrinfo(o->host, port, &hints, &ai);
    if (r != 0 || !ai) {
        snprintf(err, errlen, "cannot resolve %s: %s", o->host, evutil_gai_strerror(r));
        return -1;
    }
    memcpy(ss, ai->ai_addr, ai->ai_addrlen);
    *sslen = (socklen_t)ai->ai_addrlen;
    evutil_freeaddrinfo(ai);
    return 0;
}

/* The bufferevent: plain, or TLS with the SSL object of `o`. */
static int make_bufferevent(struct rconn_io *io, struct event_base *base, char *err,
                            size_t errlen)
{
    const struct redis_conn_opts *o = io->opt;
    /* Deferred callbacks: never run inside a caller's bufferevent_write. */
    int opts = BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS;
    if (!o->tls.enable || o->unix_path) {
        io->bev = bufferevent_socket_new(base, -1, opts);
    } else {
        SSL_CTX *ctx = tls_ctx_new(&o->tls, err, errlen);
        io->ssl = ctx ? tls_ssl_new(ctx, &o->tls, o->host, err, errlen) : NULL;
        SSL_CTX_free(ctx);
        if (!io->ssl)
            return -1;
        io->bev = bufferevent_openssl_socket_new(base, -1, io->ssl, BUFFEREVENT_SSL_CONNECTING,
                                                 opts);
        if (!io->bev)
            SSL_free(io->ssl);
    }
    if (!io->bev) {
        io->ssl = NULL;
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

struct rconn_io *rconn_io_connect(struct event_base *base, const struct redis_conn_opts *o,
                                  const struct rconn_io_events *ev, char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    socklen_t sslen;
    if (resolve(o, &ss, &sslen, err, errlen) < 0)
        return NULL;
    struct rconn_io *io = calloc(1, sizeof *io);
    if (!io) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    io->opt = o;
    io->ev = *ev;
    io->reader = redisReaderCreate();
    if (!io->reader) {
        snprintf(err, errlen, "out of memory");
        destroy(io);
        return NULL;
    }
    if (make_bufferevent(io, base, err, errlen) < 0) {
        destroy(io);
        return NULL;
    }
    bufferevent_setcb(io->bev, on_read, NULL, on_event, io);
    if (bufferevent_enable(io->bev, EV_READ | EV_WRITE) < 0
        || bufferevent_socket_connect(io->bev, (struct sockaddr *)&ss, (int)sslen) < 0) {
        snprintf(err, errlen, "%s", evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
        destroy(io);
        return NULL;
    }
    return io;
}

/* ---- sending ------------------------------------------------------------------ */

int rconn_io_send(struct rconn_io *io, const char *buf, size_t len, rconn_io_reply_fn fn,
                  void *privdata, int persistent)
{
    if (io->closing || io->free_requested)
        return -1;
    struct pending *p = calloc(1, sizeof *p);
    if (!p || bufferevent_write(io->bev, buf, len) < 0) {
        free(p);
        return -1;
    }
    p->fn = fn;
    p->privdata = privdata;
    p->persistent = persistent;
    if (io->tail)
        io->tail->next = p;
    else
        io->head = p;
    io->tail = p;
    return 0;
}

int rconn_io_command(struct rconn_io *io, rconn_io_reply_fn fn, void *privdata,
                     int persistent, int argc, const char **argv, const size_t *lens)
{
    char *buf = NULL;
    int len = redisFormatCommandArgv(&buf, argc, argv, lens);
    if (len < 0)
        return -1;
    int r = rconn_io_send(io, buf, (size_t)len, fn, privdata, persistent);
    free(buf);
    return r;
}

void rconn_io_keepalive(struct rconn_io *io)
{
    int fd = rconn_io_fd(io), on = 1, idle = KEEPALIVE_INTERVAL_S;
    int intvl = KEEPALIVE_INTERVAL_S / 3 > 0 ? KEEPALIVE_INTERVAL_S / 3 : 1, cnt = 3;
    if (fd < 0)
        return;
    /* Best effort, as in hiredis: a failure leaves the defaults. */
    (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
}

int rconn_io_silent_tls(const struct rconn_io *io)
{
    BIO *rbio = io->ssl ? SSL_get_rbio(io->ssl) : NULL;
    return rbio && !io->connected && BIO_number_written(rbio) > 0
           && BIO_number_read(rbio) == 0;
}

int rconn_io_fd(const struct rconn_io *io)
{
    return io && io->bev ? (int)bufferevent_getfd(io->bev) : -1;
}

void rconn_io_free(struct rconn_io *io)
{
    if (!io)
        return;
    if (io->in_callback) {
        io->free_requested = 1;
        io->closing = 1;
        return;
    }
    io->closing = 1;
    io->in_callback++;
    fail_pending(io);
    io->in_callback--;
    destroy(io);
}
