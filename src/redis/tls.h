/*
 * TLS for every Redis connection, on OpenSSL: the settings a connection
 * keeps, the SSL_CTX built from them, the SSL object for one connection
 * (SNI and the name the certificate must carry), and the one-line reason
 * for a failed handshake or a TLS read/write.
 *
 * Users: redis_io.c (the blocking connection of libdelayq, the CLI and the
 * daemon's start-up check) and the daemon's async connection (rconn_io.c,
 * over libevent's bufferevent_openssl).  Knows nothing of hiredis.
 */
#ifndef DQ_TLS_H
#define DQ_TLS_H

#include <delayq/client.h>
#include <stddef.h>

/* OpenSSL's SSL_CTX and SSL, without its headers in every includer. */
struct ssl_ctx_st;
struct ssl_st;

/* The TLS settings a connection keeps: every string is its own copy. */
struct tls_settings {
    int enable;                 /* 0: plain TCP (the rest is unused) */
    char *ca_file;              /* both NULL: the system's default CAs */
    char *ca_dir;
    char *cert_file;            /* client certificate, or NULL */
    char *key_file;             /* its key (NULL: in cert_file) */
    char *server_name;          /* NULL: the host connected to */
    int verify;                 /* 0: any server certificate is taken */
};

/* Copy `t` into `s`.  Returns 0, or -1 when memory ran out (`s` then
 * owns nothing). */
int tls_settings_copy(struct tls_settings *s, const dq_tls_options *t)
    __attribute__((warn_unused_result));

/* Free what `s` owns; `s` is left empty (TLS off). */
void tls_settings_free(struct tls_settings *s);

/*
 * A client SSL_CTX for `s`: the trusted CAs (ca_file, ca_dir, or the
 * system's), the client certificate and key, verification on unless
 * s->verify is 0.  NULL with one line in err naming the file that cannot
 * be read or the key that does not fit the certificate.
 */
struct ssl_ctx_st *tls_ctx_new(const struct tls_settings *s, char *err, size_t errlen);

/*
 * The SSL object of one connection to `host`: SNI and the checked name
 * set to s->server_name, else `host` (an IP address is checked as one and
 * not sent as SNI).  The caller attaches the socket.  NULL with err set.
 */
struct ssl_st *tls_ssl_new(struct ssl_ctx_st *ctx, const struct tls_settings *s,
                           const char *host, char *err, size_t errlen);

/*
 * Why a TLS operation on `ssl` failed, in one line: the server
 * certificate's problem (unknown CA, name mismatch, expired), a server
 * that does not speak TLS, a client certificate the server refused or
 * required, or OpenSSL's own reason.  `host` is the host connected to
 * (named in a mismatch when no server_name is set).  `ssl_error` is
 * SSL_get_error's answer (or 0 when unknown); `sys_errno` the errno at
 * the failure.  Consumes OpenSSL's error queue.
 */
void tls_describe_failure(struct ssl_st *ssl, const struct tls_settings *s, const char *host,
                          int ssl_error, int sys_errno, char *buf, size_t len);

/* The same for an error `code` taken out of OpenSSL's queue already
 * (libevent's bufferevent_get_openssl_error); 0 when there was none,
 * `sys_errno` then saying what the socket reported. */
void tls_describe_code(struct ssl_st *ssl, const struct tls_settings *s, const char *host,
                       unsigned long code, int sys_errno, char *buf, size_t len);

/*
 * The server dropped the connection (reset, or closed) right after the
 * handshake, before its first reply.  With TLS 1.3 that is how a refused
 * or missing client certificate shows when the server's alert is lost to
 * the reset: name that cause in buf.
 */
void tls_describe_early_close(const struct tls_settings *s, char *buf, size_t len);

/* Take one line out of OpenSSL's error queue into buf (the queue is
 * cleared); "unknown" when empty. */
void tls_queue_error(char *buf, size_t len);

#endif
