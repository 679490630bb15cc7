#include "daemon/admin/ui_auth.h"

#include <errno.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/random.h>

#include "daemon/admin/host_allow.h"

#define SESSION_BYTES 32
#define SESSION_HEX (SESSION_BYTES * 2)
#define COOKIE_NAME "dq_session"

struct session {
    char id[SESSION_HEX + 1];   /* "" for a free entry */
    int64_t used_ms;            /* monotonic: the last request with it */
    int64_t born_ms;            /* monotonic: its login */
};

/* The sessions and whose credentials they belong to, in memory shared
 * across fork (ui_auth.h). */
struct ui_auth_store {
    int set;                    /* fingerprint is some credentials' */
    uint64_t salt;
    uint64_t fingerprint;       /* of the credentials the sessions were made with */
    struct session sessions[UI_SESSIONS_MAX];
};

struct ui_auth {
    char *token;                /* NULL: no token configured */
    char *basic;                /* "user:password", or NULL */
    int64_t lifetime_ms;        /* admin.session_lifetime */
    struct ui_auth_store *store;
    int own_store;              /* made by ui_auth_new: freed with it */
    struct session *sessions;   /* store->sessions, UI_SESSIONS_MAX of them */
};

struct ui_auth_store *ui_auth_store_new(void)
{
    void *p = mmap(NULL, sizeof(struct ui_auth_store), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    struct ui_auth_store *st = p;
    if (getrandom(&st->salt, sizeof st->salt, GRND_NONBLOCK) != sizeof st->salt)
        st->salt = 0;           /* the salt only keeps the value private */
    return st;
}

void ui_auth_store_free(struct ui_auth_store *st)
{
    if (!st)
        return;
    explicit_bzero(st, sizeof *st);
    munmap(st, sizeof *st);
}

struct ui_auth *ui_auth_new(struct ui_auth_store *store)
{
    struct ui_auth *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->own_store = !store;
    a->store = store ? store : ui_auth_store_new();
    if (!a->store) {
        free(a);
        return NULL;
    }
    a->sessions = a->store->sessions;
    a->lifetime_ms = UI_SESSION_LIFETIME_MS;
    return a;
}

/* Overwrite a secret before freeing it. */
static void free_secret(char *s)
{
    if (!s)
        return;
    explicit_bzero(s, strlen(s));
    free(s);
}

static void end_all_sessions(struct ui_auth *a)
{
    explicit_bzero(a->sessions, UI_SESSIONS_MAX * sizeof *a->sessions);
}

/* The sessions of a shared store outlive this process: only a private
 * one is ended here. */
void ui_auth_free(struct ui_auth *a)
{
    if (!a)
        return;
    free_secret(a->token);
    free_secret(a->basic);
    if (a->own_store)
        ui_auth_store_free(a->store);
    free(a);
}

static int same_string(const char *x, const char *y)
{
    if (!x || !y)
        return x == y;
    return strcmp(x, y) == 0;
}

/* FNV-1a over `s` (NULL hashes as one byte no string holds). */
static uint64_t fnv(uint64_t h, const char *s)
{
    if (!s)
        return (h ^ 0xffu) * 0x100000001b3ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return (h ^ 0xfeu) * 0x100000001b3ull;
}

/* Which credentials the store's sessions were made with, salted: the
 * store keeps no secret, and a changed token or password shows. */
static uint64_t fingerprint(const struct ui_auth_store *st, const struct daemon_conf *dc)
{
    return fnv(fnv(0xcbf29ce484222325ull ^ st->salt, dc->admin_token), dc->admin_basic);
}

void ui_auth_set_conf(struct ui_auth *a, const struct daemon_conf *dc)
{
    if (dc->admin_session_lifetime_ms > 0)
        a->lifetime_ms = dc->admin_session_lifetime_ms;
    if (!same_string(a->token, dc->admin_token) || !same_string(a->basic, dc->admin_basic)) {
        free_secret(a->token);
        free_secret(a->basic);
        a->token = dc->admin_token ? strdup(dc->admin_token) : NULL;
        a->basic = dc->admin_basic ? strdup(dc->admin_basic) : NULL;
    }
    uint64_t fp = fingerprint(a->store, dc);
    if (a->store->set && a->store->fingerprint == fp)
        return;
    end_all_sessions(a);
    a->store->fingerprint = fp;
    a->store->set = 1;
}

int ui_auth_equal(const void *a, size_t alen, const void *b, size_t blen)
{
    /* Walk the longer one whole, so that the time says nothing about
     * where the first difference is. */
    const unsigned char *x = a, *y = b;
    size_t n = alen > blen ? alen : blen;
    unsigned char diff = alen != blen;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)((i < alen ? x[i] : 0) ^ (i < blen ? y[i] : 0));
    return diff == 0;
}

static int equal_str(const char *given, const char *secret)
{
    return secret && given && ui_auth_equal(given, strlen(given), secret, strlen(secret));
}

/* Decode standard base64 `in` into out[outlen] (NUL-ended); -1 when it is
 * not base64 or does not fit. */
static int base64_decode(const char *in, char *out, size_t outlen)
{
    static const char digits[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    unsigned acc = 0;
    int bits = 0;
    const char *p = in;
    for (; *p && *p != '='; p++) {
        const char *d = strchr(digits, *p);
        if (!d)
            return -1;
        acc = (acc << 6) | (unsigned)(d - digits);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (o + 1 >= outlen)
                return -1;
            out[o++] = (char)((acc >> bits) & 0xff);
        }
    }
    while (*p == '=')
        p++;
    if (*p)
        return -1;
    out[o] = '\0';
    return memchr(out, '\0', o) ? -1 : 0;
}

/* The request's Authorization header `h` (not NULL) proves a configured
 * secret. */
static int check_authorization(const struct ui_auth *a, const char *h)
{
    if (strncasecmp(h, "Bearer ", 7) == 0)
        return equal_str(h + 7, a->token);
    if (strncasecmp(h, "Basic ", 6) == 0 && a->basic) {
        char plain[1024];
        if (base64_decode(h + 6, plain, sizeof plain) < 0)
            return 0;
        int ok = equal_str(plain, a->basic);
        explicit_bzero(plain, sizeof plain);
        return ok;
    }
    return 0;
}

/* The value of cookie `name` in a Cookie header, into out (empty when
 * absent or too long). */
static void cookie_value(const char *header, const char *name, char *out, size_t outlen)
{
    out[0] = '\0';
    size_t nlen = strlen(name);
    for (const char *p = header; p && *p;) {
        while (*p == ' ' || *p == ';')
            p++;
        size_t len = strcspn(p, ";");
        if (len > nlen && strncmp(p, name, nlen) == 0 && p[nlen] == '=') {
            size_t vlen = len - nlen - 1;
            if (vlen < outlen) {
                memcpy(out, p + nlen + 1, vlen);
                out[vlen] = '\0';
            }
            return;
        }
        p += len;
    }
}

/* The session entry the request's cookie names, or NULL. */
static struct session *find_session(struct ui_auth *a, struct evhttp_request *req,
                                    int64_t now_ms)
{
    const char *h = evhttp_find_header(evhttp_request_get_input_headers(req), "Cookie");
    char id[SESSION_HEX + 2];
    cookie_value(h, COOKIE_NAME, id, sizeof id);
    if (strlen(id) != SESSION_HEX)
        return NULL;
    struct session *found = NULL;
    for (size_t i = 0; i < UI_SESSIONS_MAX; i++) {
        struct session *s = &a->sessions[i];
        if (!s->id[0])
            continue;
        if (now_ms - s->used_ms > UI_SESSION_IDLE_MS || now_ms - s->born_ms > a->lifetime_ms) {
            explicit_bzero(s, sizeof *s);
            continue;
        }
        if (ui_auth_equal(s->id, SESSION_HEX, id, SESSION_HEX))
            found = s;
    }
    return found;
}

int ui_auth_session(struct ui_auth *a, struct evhttp_request *req, int64_t now_ms)
{
    if (!a->token && !a->basic)
        return 0;
    struct session *s = find_session(a, req, now_ms);
    if (!s)
        return 0;
    s->used_ms = now_ms;
    return 1;
}

enum ui_auth_result ui_auth_header(const struct ui_auth *a, struct evhttp_request *req)
{
    const char *h = evhttp_find_header(evhttp_request_get_input_headers(req),
                                       "Authorization");
    if (!h)
        return UI_AUTH_NONE;
    return (a->token || a->basic) && check_authorization(a, h) ? UI_AUTH_OK : UI_AUTH_WRONG;
}

int ui_auth_check(struct ui_auth *a, struct evhttp_request *req, int64_t now_ms)
{
    return ui_auth_header(a, req) == UI_AUTH_OK || ui_auth_session(a, req, now_ms);
}

/* A new session id: 32 random bytes as hex; -1 when the kernel gives none. */
static int new_session_id(char out[SESSION_HEX + 1])
{
    unsigned char raw[SESSION_BYTES];
    size_t got = 0;
    while (got < sizeof raw) {
        ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        got += (size_t)n;
    }
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(out + 2 * i, 3, "%02x", raw[i]);
    explicit_bzero(raw, sizeof raw);
    return 0;
}

int ui_auth_login(struct ui_auth *a, const char *secret, int64_t now_ms, char *cookie,
                  size_t cookielen)
{
    if (!secret || !(equal_str(secret, a->token) || equal_str(secret, a->basic)))
        return -1;
    struct session *slot = &a->sessions[0];
    for (size_t i = 0; i < UI_SESSIONS_MAX; i++) {
        struct session *s = &a->sessions[i];
        if (!s->id[0]) {
            slot = s;
            break;
        }
        if (s->used_ms < slot->used_ms)
            slot = s;       /* the oldest goes when all are taken */
    }
    if (new_session_id(slot->id) < 0) {
        explicit_bzero(slot, sizeof *slot);
        return -1;
    }
    slot->used_ms = slot->born_ms = now_ms;
    snprintf(cookie, cookielen, COOKIE_NAME "=%s; Path=/ui/; HttpOnly; SameSite=Strict",
             slot->id);
    return 0;
}

void ui_auth_logout(struct ui_auth *a, struct evhttp_request *req, char *cookie,
                    size_t cookielen)
{
    struct session *s = find_session(a, req, INT64_MIN / 2);
    if (s)
        explicit_bzero(s, sizeof *s);
    snprintf(cookie, cookielen,
             COOKIE_NAME "=; Path=/ui/; HttpOnly; SameSite=Strict; Max-Age=0");
}

const char *ui_auth_challenge(const struct ui_auth *a)
{
    return a->token || !a->basic ? "Bearer realm=\"delayq\"" : "Basic realm=\"delayq\"";
}

int ui_auth_same_origin(struct evhttp_request *req, const struct daemon_conf *dc)
{
    struct evkeyvalq *hdr = evhttp_request_get_input_headers(req);
    const char *site = evhttp_find_header(hdr, "Sec-Fetch-Site");
    const char *origin = evhttp_find_header(hdr, "Origin");
    if (site && strcmp(site, "same-origin") != 0)
        return 0;
    /* The pages' Referrer-Policy: no-referrer makes a browser send
     * "Origin: null" with their own forms: then Sec-Fetch-Site decides. */
    if (!origin || strcmp(origin, "null") == 0)
        return site != NULL;
    struct host_allow set = { NULL, 0, NULL };
    if (dc)
        set = (struct host_allow){ dc->admin_hosts, dc->nadmin_hosts,
                                   dc->metrics_listen ? &dc->metrics_addr : NULL };
    return host_allow_origin(&set, host_allow_fd(req), origin);
}
