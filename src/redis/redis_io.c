/*
 * Blocking plain or TLS transport under a hiredis context (see
 * redis_io.h).  The TLS state hangs off the context's reader (its
 * privdata, which hiredis's own reply functions leave unused): hiredis
 * 0.14's context has no field of its own for it, and keeping it there
 * lets every caller go on holding a plain redisContext pointer.
 */
#include "redis/redis_io.h"

#include <errno.h>
#include <hiredis/sds.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct redis_tls {
    SSL *ssl;
    const struct tls_settings *settings; /* borrowed */
    char host[256];
    char errstr[320];                    /* the last failure, in full */
    int got_data;                        /* a reply came: past the handshake */
};

static struct redis_tls *tls_of(const redisContext *rc)
{
    return rc && rc->reader ? rc->reader->privdata : NULL;
}

/* Record a failure on the context: its class in rc->err, the text both
 * in hiredis's short errstr and in full. */
static void set_error(redisContext *rc, struct redis_tls *t, int type, const char *text)
{
    rc->err = type;
    size_t n = strlen(text) < sizeof rc->errstr ? strlen(text) : sizeof rc->errstr - 1;
    memcpy(rc->errstr, text, n);
    rc->errstr[n] = '\0';
    snprintf(t->errstr, sizeof t->errstr, "%s", text);
}

/* A failed SSL_read/SSL_write returning `ret`: a timeout on the blocking
 * socket, the server closing, or a TLS failure named by tls.c. */
static int io_failure(redisContext *rc, struct redis_tls *t, int ret)
{
    int sys = errno;
    int e = SSL_get_error(t->ssl, ret);
    char why[320];
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE
        || (e == SSL_ERROR_SYSCALL && (sys == EAGAIN || sys == EWOULDBLOCK))) {
        ERR_clear_error();
        errno = EAGAIN;
        set_error(rc, t, REDIS_ERR_IO, strerror(EAGAIN));
        return REDIS_ERR;
    }
    int closed = e == SSL_ERROR_ZERO_RETURN
                 || (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0
                     && (sys == 0 || sys == ECONNRESET || sys == EPIPE));
    if (closed && !t->got_data) {
        tls_describe_early_close(t->settings, why, sizeof why);
        set_error(rc, t, REDIS_ERR_IO, why);
        return REDIS_ERR;
    }
    if (e == SSL_ERROR_ZERO_RETURN
        || (e == SSL_ERROR_SYSCALL && sys == 0 && ERR_peek_error() == 0)) {
        set_error(rc, t, REDIS_ERR_EOF, "Server closed the connection");
        return REDIS_ERR;
    }
    tls_describe_failure(t->ssl, t->settings, t->host, e, sys, why, sizeof why);
    set_error(rc, t, REDIS_ERR_IO, why);
    errno = sys;
    return REDIS_ERR;
}

dq_status redis_io_start_tls(redisContext *rc, const struct tls_settings *s,
                             const char *host, char *err, size_t errlen)
{
    struct redis_tls *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(err, errlen, "out of memory");
        return DQ_ERR_NOMEM;
    }
    SSL_CTX *ctx = tls_ctx_new(s, err, errlen);
    t->ssl = ctx ? tls_ssl_new(ctx, s, host, err, errlen) : NULL;
    SSL_CTX_free(ctx); /* the SSL object holds its own reference */
    if (!t->ssl) {
        free(t);
        return DQ_ERR_CONNECT;
    }
    t->settings = s;
    snprintf(t->host, sizeof t->host, "%s", host);
    dq_status st = DQ_OK;
    int r = SSL_set_fd(t->ssl, rc->fd) == 1 ? SSL_connect(t->ssl) : -1;
    if (r != 1) {
        int sys = errno;
        int e = SSL_get_error(t->ssl, r);
        if ((e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
            && BIO_number_read(SSL_get_rbio(t->ssl)) == 0) {
            /* A plain Redis takes the hello for the start of an inline
             * command and waits for its end: silence is its answer. */
            ERR_clear_error();
            snprintf(err, errlen, "TLS: the server does not speak TLS on this port "
                     "(no answer to the TLS hello within the connect timeout)");
            st = DQ_ERR_CONNECT;
        } else if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
            ERR_clear_error();
            snprintf(err, errlen, "TLS handshake timed out");
            st = DQ_ERR_TIMEOUT;
        } else {
            tls_describe_failure(t->ssl, s, host, e, sys, err, errlen);
            st = DQ_ERR_CONNECT;
        }
        SSL_free(t->ssl);
        free(t);
        return st;
    }
    rc->reader->privdata = t;
    return DQ_OK;
}

int redis_io_flush(redisContext *rc)
{
    struct redis_tls *t = tls_of(rc);
    if (!t) {
        int done = 0;
        while (!done)
            if (redisBufferWrite(rc, &done) != REDIS_OK)
                return REDIS_ERR;
        return REDIS_OK;
    }
    if (rc->err)
        return REDIS_ERR;
    size_t len = sdslen(rc->obuf), off = 0;
    while (off < len) {
        ERR_clear_error();
        int n = SSL_write(t->ssl, rc->obuf + off, (int)(len - off > (1u << 30) ? (1u << 30)
                                                                              : len - off));
        if (n <= 0)
            return io_failure(rc, t, n);
        off += (size_t)n;
    }
    sdsclear(rc->obuf);
    return REDIS_OK;
}

int redis_io_get_reply(redisContext *rc, void **reply)
{
    struct redis_tls *t = tls_of(rc);
    if (!t)
        return redisGetReply(rc, reply);
    *reply = NULL;
    if (redisReaderGetReply(rc->reader, reply) != REDIS_OK)
        goto protocol;
    if (*reply)
        return REDIS_OK;
    if (redis_io_flush(rc) != REDIS_OK)
        return REDIS_ERR;
    while (!*reply) {
        char buf[16384];
        ERR_clear_error();
        int n = SSL_read(t->ssl, buf, sizeof buf);
        if (n <= 0)
            return io_failure(rc, t, n);
        t->got_data = 1;
        if (redisReaderFeed(rc->reader, buf, (size_t)n) != REDIS_OK
            || redisReaderGetReply(rc->reader, reply) != REDIS_OK)
            goto protocol;
    }
    return REDIS_OK;

protocol:
    set_error(rc, t, REDIS_ERR_PROTOCOL, rc->reader->errstr);
    return REDIS_ERR;
}

redisReply *redis_io_command(redisContext *rc, int argc, const char **argv,
                             const size_t *lens)
{
    if (!tls_of(rc))
        return redisCommandArgv(rc, argc, argv, lens);
    if (redisAppendCommandArgv(rc, argc, argv, lens) != REDIS_OK)
        return NULL;
    void *reply = NULL;
    return redis_io_get_reply(rc, &reply) == REDIS_OK ? reply : NULL;
}

const char *redis_io_errstr(const redisContext *rc)
{
    const struct redis_tls *t = tls_of(rc);
    return t && t->errstr[0] ? t->errstr : rc->errstr;
}

void redis_io_free(redisContext *rc)
{
    if (!rc)
        return;
    struct redis_tls *t = tls_of(rc);
    if (t) {
        rc->reader->privdata = NULL;
        SSL_free(t->ssl);
        free(t);
    }
    redisFree(rc);
}
