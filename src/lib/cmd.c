#include "lib/cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void cmd_init(struct cmd *c)
{
    memset(c, 0, sizeof *c);
}

void cmd_free(struct cmd *c)
{
    for (int i = 0; i < c->nowned; i++)
        free(c->owned[i]);
    free(c->owned);
    free(c->argv);
    free(c->lens);
    cmd_init(c);
}

/* Grow to hold one more argument; on failure mark the command unusable so
 * that the caller checks once, before sending, instead of after each push. */
static int cmd_reserve(struct cmd *c)
{
    if (c->oom)
        return -1;
    if (c->argc < c->cap)
        return 0;
    int cap = c->cap ? c->cap * 2 : 16;
    const char **argv = realloc(c->argv, (size_t)cap * sizeof *argv);
    if (argv)
        c->argv = argv;
    size_t *lens = realloc(c->lens, (size_t)cap * sizeof *lens);
    if (lens)
        c->lens = lens;
    if (!argv || !lens) {
        c->oom = 1;
        return -1;
    }
    c->cap = cap;
    return 0;
}

void cmd_push(struct cmd *c, const void *p, size_t len)
{
    if (cmd_reserve(c) < 0)
        return;
    c->argv[c->argc] = p ? p : "";
    c->lens[c->argc] = p ? len : 0;
    c->argc++;
}

void cmd_push_str(struct cmd *c, const char *s)
{
    cmd_push(c, s, strlen(s));
}

/* Room for `len` bytes that live as long as the command.  Copies go into
 * large blocks, so that a bulk command of thousands of arguments costs a
 * few allocations, not one per number; a full block is never moved, so the
 * argument pointers into it stay valid. */
static char *cmd_alloc(struct cmd *c, size_t len)
{
    if (c->oom)
        return NULL;
    if (c->nowned > 0 && len <= c->block_left) {
        char *p = c->owned[c->nowned - 1] + (c->block_size - c->block_left);
        c->block_left -= len;
        return p;
    }
    if (c->nowned == c->owned_cap) {
        int cap = c->owned_cap ? c->owned_cap * 2 : 4;
        char **owned = realloc(c->owned, (size_t)cap * sizeof *owned);
        if (!owned) {
            c->oom = 1;
            return NULL;
        }
        c->owned = owned;
        c->owned_cap = cap;
    }
    /* Blocks grow from 256 bytes, so that a small command stays small.  An
     * argument bigger than a block gets one of its own size; what the
     * previous block had left is given up, less than the argument. */
    size_t size = (size_t)256 << (c->nowned < 6 ? c->nowned : 6);
    if (size < len)
        size = len;
    char *b = malloc(size);
    if (!b) {
        c->oom = 1;
        return NULL;
    }
    c->owned[c->nowned++] = b;
    c->block_size = size;
    c->block_left = size - len;
    return b;
}

char *cmd_push_space(struct cmd *c, size_t len)
{
    char *p = cmd_alloc(c, len ? len : 1);
    if (p)
        cmd_push(c, p, len);
    return c->oom ? NULL : p;
}

void cmd_push_copy(struct cmd *c, const void *p, size_t len)
{
    char *copy = cmd_push_space(c, len);
    if (copy && len)
        memcpy(copy, p, len);
}

void cmd_push_i64(struct cmd *c, int64_t v)
{
    char buf[24];
    int n = snprintf(buf, sizeof buf, "%lld", (long long)v);
    cmd_push_copy(c, buf, (size_t)n);
}

void cmd_push_double(struct cmd *c, double v)
{
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%.6f", v);
    cmd_push_copy(c, buf, (size_t)n);
}

void cmd_eval(struct cmd *c, enum dq_script_id s, const struct queue_keys *k)
{
    cmd_push_str(c, "EVALSHA");
    cmd_push_str(c, dq_scripts[s].sha1);
    cmd_push_str(c, KEYS_PER_SCRIPT_STR);
    for (int i = 0; i < KEYS_PER_SCRIPT; i++)
        cmd_push_str(c, k->key[i]);
}

void cmd_eval_sched(struct cmd *c, enum dq_script_id s, const struct queue_keys *k,
                    const struct sched_keys *sk)
{
    cmd_push_str(c, "EVALSHA");
    cmd_push_str(c, dq_scripts[s].sha1);
    cmd_push_i64(c, KEYS_PER_SCRIPT + 2);
    for (int i = 0; i < KEYS_PER_SCRIPT; i++)
        cmd_push_str(c, k->key[i]);
    cmd_push_str(c, sk->defs);
    cmd_push_str(c, sk->due);
}

/* Whether argument i is `word` (any case). */
static int arg_is(const struct cmd *c, int i, const char *word)
{
    size_t n = strlen(word);
    return c->lens[i] == n && strncasecmp(c->argv[i], word, n) == 0;
}

const char *cmd_route_key(const struct cmd *c, size_t *len)
{
    int at = 1;
    if (c->argc >= 1 && (arg_is(c, 0, "EVALSHA") || arg_is(c, 0, "EVAL"))) {
        /* numkeys: no keys ("0") routes nowhere */
        if (c->argc < 4 || (c->lens[2] == 1 && c->argv[2][0] == '0'))
            return NULL;
        at = 3;
    }
    if (c->argc <= at)
        return NULL;
    *len = c->lens[at];
    return c->argv[at];
}
