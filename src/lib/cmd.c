#include "lib/cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    char **owned = realloc(c->owned, (size_t)cap * sizeof *owned);
    if (owned)
        c->owned = owned;
    if (!argv || !lens || !owned) {
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

static void cmd_push_owned(struct cmd *c, const char *text)
{
    char *copy = strdup(text);
    if (!copy || cmd_reserve(c) < 0) {
        free(copy);
        c->oom = 1;
        return;
    }
    c->owned[c->nowned++] = copy;
    cmd_push_str(c, copy);
}

void cmd_push_i64(struct cmd *c, int64_t v)
{
    char buf[24];
    snprintf(buf, sizeof buf, "%lld", (long long)v);
    cmd_push_owned(c, buf);
}

void cmd_push_double(struct cmd *c, double v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%.6f", v);
    cmd_push_owned(c, buf);
}

void cmd_eval(struct cmd *c, enum dq_script_id s, const struct queue_keys *k)
{
    cmd_push_str(c, "EVALSHA");
    cmd_push_str(c, dq_scripts[s].sha1);
    cmd_push_str(c, "5");
    for (int i = 0; i < KEYS_PER_SCRIPT; i++)
        cmd_push_str(c, k->key[i]);
}
