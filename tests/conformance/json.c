/* The conformance driver's JSON reader and value tree (json.h). */
#include "json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *must(void *p)
{
    if (!p) {
        fprintf(stderr, "conformance: out of memory\n");
        exit(99);
    }
    return p;
}

static struct jv *node(enum jtype t)
{
    struct jv *v = must(calloc(1, sizeof(struct jv)));
    v->t = t;
    return v;
}

struct jv *jv_null(void) { return node(J_NULL); }

struct jv *jv_bool(int b)
{
    struct jv *v = node(J_BOOL);
    v->t = J_BOOL;
    v->i = b != 0;
    return v;
}

struct jv *jv_int(int64_t i)
{
    struct jv *v = node(J_INT);
    v->t = J_INT;
    v->i = i;
    return v;
}

struct jv *jv_bytes(const void *p, size_t len)
{
    struct jv *v = node(J_BYTES);
    v->t = J_BYTES;
    v->s = must(malloc(len + 1));
    if (len)
        memcpy(v->s, p, len);
    v->s[len] = '\0';
    v->len = len;
    return v;
}

struct jv *jv_str(const char *s)
{
    struct jv *v = jv_bytes(s, strlen(s));
    v->t = J_STR;
    return v;
}

struct jv *jv_arr(void)
{
    struct jv *v = node(J_ARR);
    v->t = J_ARR;
    return v;
}

struct jv *jv_obj(void)
{
    struct jv *v = node(J_OBJ);
    v->t = J_OBJ;
    return v;
}

static void grow(struct jv *v)
{
    v->items = must(realloc(v->items, (v->n + 1) * sizeof *v->items));
    if (v->t == J_OBJ)
        v->keys = must(realloc(v->keys, (v->n + 1) * sizeof *v->keys));
}

void jv_push(struct jv *arr, struct jv *item)
{
    grow(arr);
    arr->items[arr->n++] = item;
}

void jv_set(struct jv *obj, const char *key, struct jv *item)
{
    grow(obj);
    obj->keys[obj->n] = must(strdup(key));
    obj->items[obj->n++] = item;
}

struct jv *jv_copy(const struct jv *v)
{
    struct jv *c = node(v->t);
    *c = *v;
    c->items = NULL;
    c->keys = NULL;
    c->n = 0;
    if (v->s) {
        c->s = must(malloc(v->len + 1));
        memcpy(c->s, v->s, v->len + 1);
    }
    for (size_t k = 0; k < v->n; k++) {
        if (v->t == J_OBJ)
            jv_set(c, v->keys[k], jv_copy(v->items[k]));
        else
            jv_push(c, jv_copy(v->items[k]));
    }
    return c;
}

void json_free(struct jv *v)
{
    if (!v)
        return;
    for (size_t k = 0; k < v->n; k++) {
        json_free(v->items[k]);
        if (v->keys)
            free(v->keys[k]);
    }
    free(v->items);
    free(v->keys);
    free(v->s);
    free(v);
}

struct jv *json_get(const struct jv *v, const char *key)
{
    if (!v || v->t != J_OBJ)
        return NULL;
    for (size_t k = 0; k < v->n; k++)
        if (strcmp(v->keys[k], key) == 0)
            return v->items[k];
    return NULL;
}

/* ---- parsing -------------------------------------------------------------- */

struct parser {
    const char *p, *start;
    char *err;
    size_t errlen;
    int failed;
};

static struct jv *fail(struct parser *ps, const char *why)
{
    if (!ps->failed)
        snprintf(ps->err, ps->errlen, "%s at byte %ld", why, (long)(ps->p - ps->start));
    ps->failed = 1;
    return NULL;
}

static void skip_ws(struct parser *ps)
{
    while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')
        ps->p++;
}

static struct jv *parse_value(struct parser *ps);

/* A string's text (escapes resolved; \u only below 0x80, all the cases
 * need) into a new J_STR node. */
static struct jv *parse_string(struct parser *ps)
{
    ps->p++;
    size_t cap = 16, n = 0;
    char *buf = must(malloc(cap));
    while (*ps->p && *ps->p != '"') {
        char c = *ps->p++;
        if (c == '\\') {
            char e = *ps->p++;
            switch (e) {
            case '"': case '\\': case '/': c = e; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'n': c = '\n'; break;
            case 'r': c = '\r'; break;
            case 't': c = '\t'; break;
            case 'u': {
                unsigned u;
                if (sscanf(ps->p, "%4x", &u) != 1 || u >= 0x80) {
                    free(buf);
                    return fail(ps, "unsupported \\u escape");
                }
                ps->p += 4;
                c = (char)u;
                break;
            }
            default:
                free(buf);
                return fail(ps, "bad escape");
            }
        }
        if (n + 1 >= cap)
            buf = must(realloc(buf, cap *= 2));
        buf[n++] = c;
    }
    if (*ps->p != '"') {
        free(buf);
        return fail(ps, "unterminated string");
    }
    ps->p++;
    struct jv *v = jv_bytes(buf, n);
    v->t = J_STR;
    free(buf);
    return v;
}

static struct jv *parse_container(struct parser *ps, char close)
{
    struct jv *v = close == ']' ? jv_arr() : jv_obj();
    ps->p++;
    skip_ws(ps);
    if (*ps->p == close) {
        ps->p++;
        return v;
    }
    for (;;) {
        skip_ws(ps);
        struct jv *key = NULL;
        if (close == '}') {
            if (*ps->p != '"' || !(key = parse_string(ps)))
                break;
            skip_ws(ps);
            if (*ps->p++ != ':') {
                json_free(key);
                break;
            }
        }
        struct jv *item = parse_value(ps);
        if (!item) {
            json_free(key);
            break;
        }
        if (key) {
            jv_set(v, key->s, item);
            json_free(key);
        } else {
            jv_push(v, item);
        }
        skip_ws(ps);
        if (*ps->p == ',') {
            ps->p++;
            continue;
        }
        if (*ps->p == close) {
            ps->p++;
            return v;
        }
        break;
    }
    json_free(v);
    return fail(ps, close == ']' ? "bad array" : "bad object");
}

static struct jv *parse_value(struct parser *ps)
{
    skip_ws(ps);
    char c = *ps->p;
    if (c == '{')
        return parse_container(ps, '}');
    if (c == '[')
        return parse_container(ps, ']');
    if (c == '"')
        return parse_string(ps);
    if (strncmp(ps->p, "null", 4) == 0) {
        ps->p += 4;
        return jv_null();
    }
    if (strncmp(ps->p, "true", 4) == 0 || strncmp(ps->p, "false", 5) == 0) {
        int b = c == 't';
        ps->p += b ? 4 : 5;
        return jv_bool(b);
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        char *end;
        long long i = strtoll(ps->p, &end, 10);
        if (*end == '.' || *end == 'e' || *end == 'E')
            return fail(ps, "a number with a fraction");
        ps->p = end;
        return jv_int(i);
    }
    return fail(ps, "expected a value");
}

struct jv *json_parse(const char *text, char *err, size_t errlen)
{
    struct parser ps = { text, text, err, errlen, 0 };
    struct jv *v = parse_value(&ps);
    skip_ws(&ps);
    if (v && *ps.p) {
        json_free(v);
        return fail(&ps, "text after the value");
    }
    return v;
}

/* ---- writing (for messages) ----------------------------------------------- */

struct out {
    char *s;
    size_t n, cap;
};

static void put(struct out *o, const char *s, size_t n)
{
    while (o->n + n + 1 > o->cap)
        o->s = must(realloc(o->s, o->cap = o->cap ? o->cap * 2 : 256));
    memcpy(o->s + o->n, s, n);
    o->n += n;
    o->s[o->n] = '\0';
}

static void write_value(struct out *o, const struct jv *v)
{
    char buf[32];
    switch (v->t) {
    case J_NULL: put(o, "null", 4); break;
    case J_BOOL: put(o, v->i ? "true" : "false", v->i ? 4 : 5); break;
    case J_INT: put(o, buf, (size_t)snprintf(buf, sizeof buf, "%lld", (long long)v->i)); break;
    case J_STR:
        put(o, "\"", 1);
        put(o, v->s, v->len > 80 ? 80 : v->len);
        put(o, v->len > 80 ? "...\"" : "\"", v->len > 80 ? 4 : 1);
        break;
    case J_BYTES:
        put(o, "{\"hex\": \"", 9);
        for (size_t k = 0; k < v->len && k < 40; k++)
            put(o, buf, (size_t)snprintf(buf, sizeof buf, "%02x", (unsigned char)v->s[k]));
        put(o, v->len > 40 ? "...\"}" : "\"}", v->len > 40 ? 5 : 2);
        break;
    case J_ARR:
    case J_OBJ:
        put(o, v->t == J_ARR ? "[" : "{", 1);
        for (size_t k = 0; k < v->n; k++) {
            if (k)
                put(o, ", ", 2);
            if (v->t == J_OBJ) {
                put(o, "\"", 1);
                put(o, v->keys[k], strlen(v->keys[k]));
                put(o, "\": ", 3);
            }
            write_value(o, v->items[k]);
        }
        put(o, v->t == J_ARR ? "]" : "}", 1);
        break;
    }
}

char *json_text(const struct jv *v)
{
    struct out o = { NULL, 0, 0 };
    put(&o, "", 0);
    write_value(&o, v);
    return o.s;
}
