/*
 * TLS settings, contexts and failure messages (see tls.h).
 */
#include "redis/tls.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int dup_or_null(char **dst, const char *src)
{
    *dst = src ? strdup(src) : NULL;
    return src && !*dst ? -1 : 0;
}

int tls_settings_copy(struct tls_settings *s, const dq_tls_options *t)
{
    memset(s, 0, sizeof *s);
    s->enable = t->enable;
    s->verify = t->verify;
    if (dup_or_null(&s->ca_file, t->ca_file) < 0 || dup_or_null(&s->ca_dir, t->ca_dir) < 0
        || dup_or_null(&s->cert_file, t->cert_file) < 0
        || dup_or_null(&s->key_file, t->key_file) < 0
        || dup_or_null(&s->server_name, t->server_name) < 0) {
        tls_settings_free(s);
        return -1;
    }
    return 0;
}

void tls_settings_free(struct tls_settings *s)
{
    free(s->ca_file);
    free(s->ca_dir);
    free(s->cert_file);
    free(s->key_file);
    free(s->server_name);
    memset(s, 0, sizeof *s);
}

void tls_queue_error(char *buf, size_t len)
{
    unsigned long e = ERR_get_error();
    char text[256] = "unknown";
    if (e) {
        const char *reason = ERR_reason_error_string(e);
        if (reason)
            snprintf(text, sizeof text, "%s", reason);
        else
            ERR_error_string_n(e, text, sizeof text);
    }
    ERR_clear_error();
    snprintf(buf, len, "%s", text);
}

/* Whether `file` can be opened for reading: else errno's text in err,
 * naming `what` and the file, so that a wrong path is named before
 * OpenSSL's vaguer "no such file" or "no start line". */
static int check_readable(const char *what, const char *file, int dir, char *err,
                          size_t errlen)
{
    if (dir) {
        DIR *d = opendir(file);
        if (d) {
            closedir(d);
            return 0;
        }
    } else {
        FILE *f = fopen(file, "r");
        if (f) {
            fclose(f);
            return 0;
        }
    }
    snprintf(err, errlen, "cannot read TLS %s %s: %s", what, file, strerror(errno));
    return -1;
}

/* Load the trusted CAs: the given file and directory, or the system's. */
static int load_trust(SSL_CTX *ctx, const struct tls_settings *s, char *err, size_t errlen)
{
    if (!s->ca_file && !s->ca_dir) {
        if (SSL_CTX_set_default_verify_paths(ctx) == 1)
            return 0;
        char why[256];
        tls_queue_error(why, sizeof why);
        snprintf(err, errlen, "cannot load the system's CA certificates: %s", why);
        return -1;
    }
    if ((s->ca_file && check_readable("CA file", s->ca_file, 0, err, errlen) < 0)
        || (s->ca_dir && check_readable("CA directory", s->ca_dir, 1, err, errlen) < 0))
        return -1;
    if (SSL_CTX_load_verify_locations(ctx, s->ca_file, s->ca_dir) == 1)
        return 0;
    char why[256];
    tls_queue_error(why, sizeof why);
    snprintf(err, errlen, "cannot load TLS CA certificates from %s: %s",
             s->ca_file ? s->ca_file : s->ca_dir, why);
    return -1;
}

/* Load the client certificate and its key, and check that they fit. */
static int load_identity(SSL_CTX *ctx, const struct tls_settings *s, char *err,
                         size_t errlen)
{
    const char *key = s->key_file ? s->key_file : s->cert_file;
    char why[256];
    if (check_readable("certificate", s->cert_file, 0, err, errlen) < 0
        || check_readable("key", key, 0, err, errlen) < 0)
        return -1;
    if (SSL_CTX_use_certificate_chain_file(ctx, s->cert_file) != 1) {
        tls_queue_error(why, sizeof why);
        snprintf(err, errlen, "cannot load TLS certificate %s: %s", s->cert_file, why);
        return -1;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
        tls_queue_error(why, sizeof why);
        snprintf(err, errlen, "cannot load TLS key %s: %s", key, why);
        return -1;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        ERR_clear_error();
        snprintf(err, errlen, "TLS key %s does not belong to certificate %s", key,
                 s->cert_file);
        return -1;
    }
    return 0;
}

SSL_CTX *tls_ctx_new(const struct tls_settings *s, char *err, size_t errlen)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx) {
        char why[256];
        tls_queue_error(why, sizeof why);
        snprintf(err, errlen, "cannot make a TLS context: %s", why);
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(ctx, s->verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
    if ((s->verify && load_trust(ctx, s, err, errlen) < 0)
        || (s->cert_file && load_identity(ctx, s, err, errlen) < 0)) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

SSL *tls_ssl_new(SSL_CTX *ctx, const struct tls_settings *s, const char *host,
                 char *err, size_t errlen)
{
    const char *name = s->server_name ? s->server_name : host;
    unsigned char addr[16];
    int is_ip = inet_pton(AF_INET, name, addr) == 1 || inet_pton(AF_INET6, name, addr) == 1;
    SSL *ssl = SSL_new(ctx);
    if (!ssl)
        goto fail;
    /* SNI carries host names only (RFC 6066). */
    if (!is_ip && SSL_set_tlsext_host_name(ssl, name) != 1)
        goto fail;
    if (s->verify) {
        X509_VERIFY_PARAM *param = SSL_get0_param(ssl);
        X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        if (is_ip ? X509_VERIFY_PARAM_set1_ip_asc(param, name) != 1
                  : X509_VERIFY_PARAM_set1_host(param, name, 0) != 1)
            goto fail;
    }
    return ssl;

fail:;
    char why[256];
    tls_queue_error(why, sizeof why);
    snprintf(err, errlen, "cannot set up TLS for %s: %s", name, why);
    SSL_free(ssl);
    return NULL;
}

/* The server certificate's problem in words a user acts on. */
static void describe_verify(long v, const struct tls_settings *s, const char *name,
                            char *buf, size_t len)
{
    const char *text = X509_verify_cert_error_string(v);
    switch (v) {
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
        snprintf(buf, len, "TLS: the server's certificate is not signed by a trusted CA "
                 "(%s; trusted: %s)", text,
                 s->ca_file ? s->ca_file : s->ca_dir ? s->ca_dir : "the system's CAs");
        break;
    case X509_V_ERR_HOSTNAME_MISMATCH:
    case X509_V_ERR_IP_ADDRESS_MISMATCH:
        snprintf(buf, len, "TLS: the server's certificate is not for %s "
                 "(name mismatch; set server_name / --sni to the name it carries)", name);
        break;
    case X509_V_ERR_CERT_HAS_EXPIRED:
        snprintf(buf, len, "TLS: the server's certificate has expired");
        break;
    case X509_V_ERR_CERT_NOT_YET_VALID:
        snprintf(buf, len, "TLS: the server's certificate is not valid yet "
                 "(check the clocks)");
        break;
    default:
        snprintf(buf, len, "TLS: the server's certificate was refused: %s", text);
    }
}

/* The first OpenSSL error of the SSL library in the queue, or 0. */
static unsigned long first_ssl_error(void)
{
    unsigned long e, found = 0;
    while ((e = ERR_get_error()) != 0)
        if (!found && ERR_GET_LIB(e) == ERR_LIB_SSL)
            found = e;
    return found;
}

/* The failure of `ssl` whose first OpenSSL error is `e` (0: none). */
static void describe(SSL *ssl, const struct tls_settings *s, const char *host,
                     unsigned long e, int ssl_error, int sys_errno, char *buf, size_t len)
{
    long v = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;
    const char *name = s->server_name ? s->server_name : host;
    if (s->verify && v != X509_V_OK) {
        ERR_clear_error();
        describe_verify(v, s, name, buf, len);
        return;
    }
    int reason = e ? ERR_GET_REASON(e) : 0;
    const char *text = e ? ERR_reason_error_string(e) : NULL;
    switch (reason) {
    case 0:
        break;
    case SSL_R_WRONG_VERSION_NUMBER:
    case SSL_R_UNKNOWN_PROTOCOL:
    case SSL_R_PACKET_LENGTH_TOO_LONG:
        snprintf(buf, len, "TLS: the server does not speak TLS on this port (%s)", text);
        return;
    case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
    case SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE:
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
    case SSL_R_TLSV1_ALERT_ACCESS_DENIED:
        if (!s->cert_file)
            snprintf(buf, len, "TLS: the server requires a client certificate (%s; "
                     "set cert_file and key_file, or --cert and --key)", text);
        else
            snprintf(buf, len, "TLS: the server refused the client certificate %s (%s)",
                     s->cert_file, text);
        return;
    default:
        snprintf(buf, len, "TLS: %s", text ? text : "handshake failed");
        return;
    }
    if (ssl_error == SSL_ERROR_ZERO_RETURN || (ssl_error == SSL_ERROR_SYSCALL && !sys_errno))
        snprintf(buf, len, "TLS: the server closed the connection (a server that does "
                 "not speak TLS, or refuses this client, does that)");
    else if (sys_errno)
        snprintf(buf, len, "TLS: %s", strerror(sys_errno));
    else
        snprintf(buf, len, "TLS: failed (OpenSSL error %d)", ssl_error);
}

void tls_describe_failure(SSL *ssl, const struct tls_settings *s, const char *host,
                          int ssl_error, int sys_errno, char *buf, size_t len)
{
    unsigned long e = first_ssl_error();
    describe(ssl, s, host, e, ssl_error, sys_errno, buf, len);
}

void tls_describe_code(SSL *ssl, const struct tls_settings *s, const char *host,
                       unsigned long code, int sys_errno, char *buf, size_t len)
{
    describe(ssl, s, host, code, code ? SSL_ERROR_SSL : SSL_ERROR_SYSCALL, sys_errno, buf,
             len);
}

void tls_describe_early_close(const struct tls_settings *s, char *buf, size_t len)
{
    ERR_clear_error();
    if (!s->cert_file)
        snprintf(buf, len, "TLS: the server closed the connection after the handshake: "
                 "it requires a client certificate (set cert_file and key_file, or "
                 "--cert and --key)");
    else
        snprintf(buf, len, "TLS: the server closed the connection after the handshake: "
                 "it refused the client certificate %s", s->cert_file);
}
