/*
 * The http handler: POST each job's payload to a URL.
 *
 * Settings:
 *   url = "http://127.0.0.1:8080/jobs";     # required; http only
 *   content_type = "application/json";      # default application/octet-stream
 *   headers = ["Authorization: Bearer x"];  # extra request headers
 *   timeout = "10s";     # default: the type's timeout less a margin, or 30s
 *   idempotency_header = "Idempotency-Key";  # the default; "" sends none
 *
 * The request carries X-Delayq-Job-Id, X-Delayq-Job-Type, X-Delayq-Attempt,
 * X-Delayq-Queue and X-Delayq-Fence (the attempt's fence, when the daemon
 * hands it over), and an idempotency key that names the job, the same for
 * every attempt: "QUEUE/ID/CREATED_MS" (docs/handlers.md).  One connection
 * per job ("Connection: close").
 *
 * Result: 2xx: OK.  408, 429, 5xx, connection errors and timeouts: RETRY
 * (after Retry-After, when it is a number of seconds), and 409 too when an
 * idempotency key was sent: a receiver answers so while an earlier attempt
 * with the same key is still in its hands.  Any other status: FAIL
 * "HTTP 404 Not Found".  Its job cancelled while the request waits on the
 * network (`delayq cancel`): the request is abandoned within
 * HTTP_STOP_CHECK_MS.
 */
#define _GNU_SOURCE
#include <delayq/handler.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http_post.h"

#define HTTP_DEFAULT_TIMEOUT_MS 30000

struct http_state {
    const dq_host *host;
    char *url;              /* as configured, for messages */
    struct http_url u;
    char *content_type;
    char *extra;            /* the configured headers, each with its CRLF */
    char *idem_header;      /* the idempotency key's header name, or NULL */
    int has_fence;          /* the daemon's jobs have their fence */
    int64_t timeout_ms;     /* 0: none */
};

static void http_fini(void *state)
{
    struct http_state *hs = state;
    if (!hs)
        return;
    free(hs->url);
    http_url_free(&hs->u);
    free(hs->content_type);
    free(hs->extra);
    free(hs->idem_header);
    free(hs);
}

/* Whether s can be a header value: no control characters but tab. */
static int header_safe(const char *s)
{
    for (; *s; s++)
        if (((unsigned char)*s < 0x20 && *s != '\t') || *s == 0x7f)
            return 0;
    return 1;
}

/* Whether s is a header name: one or more of HTTP's token characters. */
static int header_name(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9')
              || strchr("!#$%&'*+-.^_`|~", *s)))
            return 0;
    return 1;
}

/* Whether the block of "Name: value\r\n" lines sets header `name` (names
 * are case-insensitive). */
static int sets_header(const char *block, const char *name)
{
    size_t len = strlen(name);
    for (const char *line = block; *line; line = strstr(line, "\r\n") + 2)
        if (strncasecmp(line, name, len) == 0 && line[len] == ':')
            return 1;
    return 0;
}

/* The `headers` list as one block of "Name: value\r\n" lines. */
static int read_headers(struct http_state *hs, const dq_host *host,
                        const dq_settings *s, char *err, size_t errlen)
{
    size_t n = host->setting_list_len(s, "headers"), total = 1;
    for (size_t i = 0; i < n; i++) {
        const char *h = host->setting_list_item(s, "headers", i);
        if (!h)
            break;
        const char *colon = strchr(h, ':');
        if (!colon || colon == h || !header_safe(h) || strcspn(h, " \t") < (size_t)(colon - h)) {
            snprintf(err, errlen, "http: header \"%s\": expected \"Name: value\" on "
                     "one line", h);
            return -1;
        }
        total += strlen(h) + 2;
    }
    if (host->setting_error(s)) {
        snprintf(err, errlen, "%s", host->setting_error(s));
        return -1;
    }
    if (!(hs->extra = malloc(total))) {
        snprintf(err, errlen, "http: out of memory");
        return -1;
    }
    hs->extra[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        strcat(hs->extra, host->setting_list_item(s, "headers", i));
        strcat(hs->extra, "\r\n");
    }
    return 0;
}

static int http_init(const dq_host *host, const dq_settings *s, void **state,
                     char *err, size_t errlen)
{
    struct http_state *hs = calloc(1, sizeof *hs);
    if (!hs) {
        snprintf(err, errlen, "http: out of memory");
        return -1;
    }
    hs->host = host;
    const char *url = host->setting_string(s, "url", NULL);
    const char *ctype = host->setting_string(s, "content_type", "application/octet-stream");
    const char *idem = host->setting_string(s, "idempotency_header", "Idempotency-Key");
    int64_t def = HTTP_DEFAULT_TIMEOUT_MS;
    if (host->timeout_ms > 0) /* give up a little before the worker is stopped */
        def = host->timeout_ms - (host->timeout_ms / 10 < 1000 ? host->timeout_ms / 10 : 1000);
    hs->timeout_ms = host->setting_duration_ms(s, "timeout", def);
    if (host->setting_error(s)) {
        snprintf(err, errlen, "%s", host->setting_error(s));
        goto fail;
    }
    if (!url) {
        snprintf(err, errlen, "http: url is required, such as "
                 "url = \"http://127.0.0.1:8080/jobs\"");
        goto fail;
    }
    if (!header_safe(ctype)) {
        snprintf(err, errlen, "http: content_type: control characters");
        goto fail;
    }
    if (*idem && !header_name(idem)) {
        snprintf(err, errlen, "http: idempotency_header \"%s\" is not a header name "
                 "(letters, digits and !#$%%&'*+-.^_`|~), or \"\" for none", idem);
        goto fail;
    }
    if (*idem && !(hs->idem_header = strdup(idem))) {
        snprintf(err, errlen, "http: out of memory");
        goto fail;
    }
    hs->has_fence = DQ_JOB_HAS(host, fence);
    if (http_url_parse(url, &hs->u, err, errlen) < 0)
        goto fail;
    if (read_headers(hs, host, s, err, errlen) < 0)
        goto fail;
    if (hs->idem_header && sets_header(hs->extra, hs->idem_header)) {
        snprintf(err, errlen, "http: headers sets %s, which the handler sends with each job's "
                 "idempotency key: remove it, or set idempotency_header = \"\"", hs->idem_header);
        goto fail;
    }
    if (!(hs->url = strdup(url)) || !(hs->content_type = strdup(ctype))) {
        snprintf(err, errlen, "http: out of memory");
        goto fail;
    }
    *state = hs;
    return 0;
fail:
    http_fini(hs);
    return -1;
}

/* The request line and headers for one job; NULL when out of memory.
 * The fence tells one attempt from another; the idempotency key names the
 * job, so every attempt of it sends the same one (an id used again for a
 * new job has a new creation time). */
static char *request_head(const struct http_state *hs, const dq_handler_job *job,
                          size_t *len)
{
    char fence[64] = "";
    if (hs->has_fence)
        snprintf(fence, sizeof fence, "X-Delayq-Fence: %lld\r\n", (long long)job->fence);
    char *key = NULL;
    if (hs->idem_header
        && asprintf(&key, "%s: %s/%s/%lld\r\n", hs->idem_header, job->queue, job->id,
                    (long long)job->created_ms) < 0)
        return NULL;
    char *head = NULL;
    int n = asprintf(&head,
                     "POST %s HTTP/1.1\r\n"
                     "Host: %s\r\n"
                     "User-Agent: delayq-http/1\r\n"
                     "Content-Type: %s\r\n"
                     "Content-Length: %zu\r\n"
                     "X-Delayq-Job-Id: %s\r\n"
                     "X-Delayq-Job-Type: %s\r\n"
                     "X-Delayq-Attempt: %d\r\n"
                     "X-Delayq-Queue: %s\r\n"
                     "%s%s%s"
                     "Connection: close\r\n"
                     "\r\n",
                     hs->u.path, hs->u.authority, hs->content_type, job->payload_len,
                     job->id, job->type, job->attempt, job->queue, fence, key ? key : "",
                     hs->extra);
    free(key);
    if (n < 0)
        return NULL;
    *len = (size_t)n;
    return head;
}

/* What a status means for the job; `keyed`: an idempotency key was sent. */
static dq_handler_result map_status(const struct http_answer *a, int keyed,
                                    dq_handler_outcome *out)
{
    if (a->status >= 200 && a->status < 300)
        return DQ_HANDLER_OK;
    snprintf(out->error, sizeof out->error, "HTTP %d%s%s", a->status,
             a->reason[0] ? " " : "", a->reason);
    if (a->status == 408 || a->status == 429 || a->status >= 500
        || (a->status == 409 && keyed)) {
        if (a->retry_after_s >= 0)
            out->retry_delay_ms = a->retry_after_s * 1000;
        return DQ_HANDLER_RETRY;
    }
    return DQ_HANDLER_FAIL;
}

/* The job a request is sent for, and whose cancel abandons it. */
struct http_watch {
    const dq_host *host;
    const dq_handler_job *job;
};

static int job_cancelled(const void *arg)
{
    const struct http_watch *w = arg;
    return w->host->cancelled(w->job);
}

static dq_handler_result http_handle(void *state, const dq_handler_job *job,
                                     dq_handler_outcome *out)
{
    struct http_state *hs = state;
    if (!header_safe(job->id) || !header_safe(job->type) || !header_safe(job->queue)) {
        snprintf(out->error, sizeof out->error, "http: the job's id, type or queue has "
                 "control characters: it cannot go into a header");
        return DQ_HANDLER_FAIL;
    }
    size_t headlen;
    char *head = request_head(hs, job, &headlen);
    if (!head) {
        snprintf(out->error, sizeof out->error, "http: out of memory");
        return DQ_HANDLER_RETRY;
    }
    int64_t deadline = hs->timeout_ms > 0 ? http_now_ms() + hs->timeout_ms : 0;
    struct http_answer ans;
    char why[256] = "";
    struct http_watch watch = { hs->host, job };
    struct http_stop stop = { job_cancelled, &watch };
    enum http_status_kind k = http_post(&hs->u, head, headlen, job->payload,
                                        job->payload_len, deadline,
                                        DQ_HOST_HAS(hs->host, cancelled) ? &stop : NULL,
                                        &ans, why, sizeof why);
    free(head);
    switch (k) {
    case HTTP_STOPPED:      /* ended in Redis already: the outcome is moot */
        snprintf(out->error, sizeof out->error, "cancelled %s (%s)", why, hs->url);
        return DQ_HANDLER_FAIL;
    case HTTP_ANSWERED:
        return map_status(&ans, hs->idem_header != NULL, out);
    case HTTP_TIMEOUT:
        snprintf(out->error, sizeof out->error, "timeout after %lld ms %s (%s)",
                 (long long)hs->timeout_ms, why, hs->url);
        return DQ_HANDLER_RETRY;
    case HTTP_NET_ERROR:
    default:
        snprintf(out->error, sizeof out->error, "%s (%s)", why, hs->url);
        return DQ_HANDLER_RETRY;
    }
}

DQ_HANDLER_DEFINE("http", http_init, http_handle, http_fini);
