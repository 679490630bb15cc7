#include "lib/keys.h"

#include "redis/cluster_map.h"

#include <delayq/client.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static const char *const key_suffix[KEYS_PER_SCRIPT] = {
    "jobs", "delayed", "processing", "dead", "meta", "lease"
};

void keys_build(struct queue_keys *k, const char *prefix, const char *queue)
{
    for (int i = 0; i < KEYS_PER_SCRIPT; i++)
        snprintf(k->key[i], sizeof k->key[i], "%s:{%s}:%s", prefix, queue,
                 key_suffix[i]);
    snprintf(k->wake, sizeof k->wake, "%s:{%s}:wake", prefix, queue);
}

void keys_build_part(struct queue_keys *k, const char *prefix, const char *queue,
                     unsigned part, unsigned nparts)
{
    if (nparts <= 1) {
        keys_build(k, prefix, queue);
        return;
    }
    for (int i = 0; i < KEYS_PER_SCRIPT; i++)
        snprintf(k->key[i], sizeof k->key[i], "%s:{%s:%u}:%s", prefix, queue, part,
                 key_suffix[i]);
    snprintf(k->wake, sizeof k->wake, "%s:{%s:%u}:wake", prefix, queue, part);
}

/* Whether `s` matches `shape`, where '9' stands for any digit and every
 * other character for itself; *rest receives what follows. */
static int shaped(const char *s, const char *shape, const char **rest)
{
    for (; *shape; shape++, s++) {
        if (*shape == '9' ? (*s < '0' || *s > '9') : *s != *shape)
            return 0;
    }
    *rest = s;
    return 1;
}

bool keys_is_schedule_id(const char *id)
{
    const char *at = strchr(id, '@'), *p;
    if (!at || at == id)
        return false;
    p = at + 1;
    if (strncmp(p, "now-", 4) == 0)
        p += 4;
    if (!shaped(p, "9999-99-99T99:99:99", &p))
        return false;
    if (*p == '.') {
        size_t digits = strspn(p + 1, "0123456789");
        if (digits == 0)
            return false;
        p += 1 + digits;
    }
    return strcmp(p, "Z") == 0;
}

unsigned keys_partition_of(const char *id, unsigned nparts)
{
    if (nparts <= 1 || keys_is_schedule_id(id))
        return 0;
    size_t len = strlen(id);
    if (len > 0 && strspn(id, "0123456789") == len) {
        /* mod as the digits come: any length, no overflow */
        unsigned r = 0;
        for (const char *p = id; *p; p++)
            r = (unsigned)(((unsigned long)r * 10 + (unsigned)(*p - '0')) % nparts);
        return r;
    }
    return cluster_crc16(id, len) % nparts;
}

void keys_build_sched(struct sched_keys *k, const char *prefix, const char *queue)
{
    snprintf(k->defs, sizeof k->defs, "%s:{%s}:schedules", prefix, queue);
    snprintf(k->due, sizeof k->due, "%s:{%s}:schedule_due", prefix, queue);
}

void keys_build_sched_part(struct sched_keys *k, const char *prefix, const char *queue,
                           unsigned nparts)
{
    if (nparts <= 1) {
        keys_build_sched(k, prefix, queue);
        return;
    }
    snprintf(k->defs, sizeof k->defs, "%s:{%s:0}:schedules", prefix, queue);
    snprintf(k->due, sizeof k->due, "%s:{%s:0}:schedule_due", prefix, queue);
}

void keys_registry(char *out, size_t outlen, const char *prefix)
{
    snprintf(out, outlen, "%s:queues", prefix);
}

/* Printable ASCII without spaces: names appear in keys, logs and tables. */
static int is_plain(const char *s)
{
    for (; *s; s++)
        if (*s <= ' ' || *s > '~')
            return 0;
    return 1;
}

const char *keys_check_queue(const char *queue)
{
    if (!queue || !*queue)
        return "queue name is empty";
    if (strlen(queue) > DQ_QUEUE_MAX)
        return "queue name is longer than 128 bytes";
    if (!is_plain(queue))
        return "queue name has a space or a non-printable character";
    /* Braces would change the Redis Cluster hash tag of the queue's keys. */
    if (strpbrk(queue, "{}"))
        return "queue name contains '{' or '}'";
    return NULL;
}

const char *keys_check_prefix(const char *prefix)
{
    if (!prefix || !*prefix)
        return "key prefix is empty";
    if (strlen(prefix) > 64)
        return "key prefix is longer than 64 bytes";
    if (!is_plain(prefix) || strpbrk(prefix, "{}"))
        return "key prefix has a space, a brace or a non-printable character";
    return NULL;
}

const char *keys_check_type(const char *type)
{
    if (!type || !*type)
        return "job type is empty";
    if (strlen(type) > DQ_TYPE_MAX)
        return "job type is longer than 128 bytes";
    if (!is_plain(type))
        return "job type has a space or a non-printable character";
    if (strcmp(type, "*") == 0)
        return "job type '*' is kept for the handler table's fallback";
    return NULL;
}

const char *keys_check_id(const char *id)
{
    if (!id || !*id)
        return "job id is empty";
    if (strlen(id) > DQ_ID_MAX)
        return "job id is longer than 256 bytes";
    if (!is_plain(id))
        return "job id has a space or a non-printable character";
    if (strspn(id, "0123456789") == strlen(id))
        return "job id is all digits (that form is kept for generated ids)";
    if (strcmp(id, ".") == 0 || strcmp(id, "..") == 0)
        return "job id is '.' or '..' (a path segment that URLs cannot name)";
    /* Routed to partition 0 as a schedule's job would be: refused, so that
     * a producer's id always routes by its CRC16. */
    if (keys_is_schedule_id(id))
        return "job id has the form NAME@2026-01-06T00:00:00Z, kept for the jobs of "
               "recurring schedules";
    return NULL;
}
