/*
 * The bytes of a blocking hiredis context, plain or TLS.
 *
 * hiredis 0.14 reads and writes the socket itself and knows no TLS, so a
 * TLS connection keeps the context as the RESP codec only: commands are
 * appended to its output buffer (redisAppendCommandArgv), written with
 * SSL_write, and the bytes SSL_read returns are fed to its reader.  The
 * context's socket stays blocking with hiredis's timeouts (SO_RCVTIMEO,
 * SO_SNDTIMEO), so a TLS read or write that would block has timed out.
 * A plain context goes straight to hiredis, as before.
 *
 * Users: redis_conn.c (open), client.c (every command), the daemon's
 * start-up check.  Callers must have SIGPIPE dealt with, as for hiredis.
 */
#ifndef DQ_REDIS_IO_H
#define DQ_REDIS_IO_H

#include <delayq/client.h>
#include <hiredis/hiredis.h>
#include <stddef.h>

#include "redis/tls.h"

/*
 * Start TLS on the connected context `rc` to `host` (the name checked
 * unless s->server_name is set) and hand-shake.  `s` is borrowed and must
 * outlive the context.  Returns DQ_OK, or DQ_ERR_CONNECT (the cause in
 * one line in err), DQ_ERR_TIMEOUT or DQ_ERR_NOMEM; `rc` is then left as
 * it was, for the caller to free.
 */
dq_status redis_io_start_tls(redisContext *rc, const struct tls_settings *s,
                             const char *host, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* redisCommandArgv over the context's transport: the reply, or NULL with
 * rc->err set. */
redisReply *redis_io_command(redisContext *rc, int argc, const char **argv,
                             const size_t *lens);

/* Write all of the output buffer (REDIS_OK), or REDIS_ERR with rc->err. */
int redis_io_flush(redisContext *rc);

/* redisGetReply over the context's transport: the output buffer is
 * written first, then one reply is read into *reply. */
int redis_io_get_reply(redisContext *rc, void **reply);

/* Why the context failed, in one line (longer than hiredis's errstr
 * holds, for TLS causes). */
const char *redis_io_errstr(const redisContext *rc);

/* Free the context and its TLS state.  NULL is ignored. */
void redis_io_free(redisContext *rc);

#endif
