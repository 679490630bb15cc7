/*
 * A small HTTP/1.1 client over a raw socket, for the tests of the admin
 * server and the dashboard: any method, any headers, any body, and the
 * answer's status, headers and body as sent (no redirect followed, no
 * cookie kept).  One request per connection ("Connection: close").
 * No Check in it: it reports failures through its return values.
 */
#ifndef DQ_TEST_HTTP_CLIENT_H
#define DQ_TEST_HTTP_CLIENT_H

#include <stddef.h>

struct http_reply {
    int status;                 /* 0: no status line came back */
    char *head;                 /* the header lines, "Name: value\r\n" each */
    char *body;                 /* NUL-ended (may hold NULs before: body_len) */
    size_t body_len;
};

/*
 * Send `method` `path` to 127.0.0.1:`port` with the header lines in
 * `headers` (NULL or "Name: value\r\n..."; "Host: 127.0.0.1:PORT" is added
 * unless given) and `body` (NULL: none; a Content-Length is added), and
 * read the whole answer into *r within `timeout_ms`.  Returns 0, or -1
 * when the connection failed or timed out (*r then holds what came).
 * Free with http_reply_free.
 */
int http_request(int port, const char *method, const char *path, const char *headers,
                 const char *body, size_t body_len, int timeout_ms, struct http_reply *r);

/* The value of header `name` (case-insensitive) of `r`, copied into
 * out[outlen]; NULL when absent. */
const char *http_header(const struct http_reply *r, const char *name, char *out,
                        size_t outlen);

void http_reply_free(struct http_reply *r);

/* A connected TCP socket to 127.0.0.1:`port`, or -1 (for tests that speak
 * by hand: half a request, many idle connections). */
int http_connect(int port);

/* Whether the server closed `fd` (EOF or reset) within `timeout_ms`:
 * 1 closed, 0 still open (data that arrives is read and dropped). */
int http_closed_within(int fd, int timeout_ms);

#endif
