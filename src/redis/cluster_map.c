#include "redis/cluster_map.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The table-free bitwise form of CRC16-CCITT (XMODEM: polynomial 0x1021,
 * initial 0): fast enough for one key per command. */
uint16_t cluster_crc16(const char *buf, size_t len)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)((unsigned char)buf[i] << 8);
        for (int b = 0; b < 8; b++)
            crc = (uint16_t)(crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1);
    }
    return crc;
}

unsigned cluster_keyslot(const char *key, size_t len)
{
    const char *open = memchr(key, '{', len);
    if (open) {
        size_t rest = len - (size_t)(open - key) - 1;
        const char *close = memchr(open + 1, '}', rest);
        if (close && close > open + 1)
            return cluster_crc16(open + 1, (size_t)(close - open - 1)) & (CLUSTER_SLOTS - 1);
    }
    return cluster_crc16(key, len) & (CLUSTER_SLOTS - 1);
}

void cluster_map_init(struct cluster_map *m)
{
    m->nodes = NULL;
    m->nnodes = 0;
    for (size_t i = 0; i < CLUSTER_SLOTS; i++)
        m->slot[i] = CLUSTER_NO_NODE;
}

void cluster_map_free(struct cluster_map *m)
{
    free(m->nodes);
    cluster_map_init(m);
}

int cluster_map_node(struct cluster_map *m, const char *host, int port)
{
    for (size_t i = 0; i < m->nnodes; i++)
        if (m->nodes[i].port == port && strcmp(m->nodes[i].host, host) == 0)
            return (int)i;
    if (m->nnodes >= CLUSTER_NO_NODE)
        return -1;
    struct cluster_node *n = realloc(m->nodes, (m->nnodes + 1) * sizeof *n);
    if (!n)
        return -1;
    m->nodes = n;
    snprintf(n[m->nnodes].host, sizeof n->host, "%s", host);
    n[m->nnodes].port = port;
    return (int)m->nnodes++;
}

unsigned cluster_map_lookup(const struct cluster_map *m, unsigned slot)
{
    return slot < CLUSTER_SLOTS ? m->slot[slot] : CLUSTER_NO_NODE;
}

/* One range of a CLUSTER SLOTS reply: [start, end, [host, port, id...],
 * replicas...]; its master into `m`.  0, or -1 with the cause in err. */
static int load_range(struct cluster_map *m, const redisReply *r, const char *asked_host,
                      char *err, size_t errlen)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3
        || r->element[0]->type != REDIS_REPLY_INTEGER
        || r->element[1]->type != REDIS_REPLY_INTEGER
        || r->element[2]->type != REDIS_REPLY_ARRAY || r->element[2]->elements < 2
        || r->element[2]->element[0]->type != REDIS_REPLY_STRING
        || r->element[2]->element[1]->type != REDIS_REPLY_INTEGER) {
        snprintf(err, errlen, "CLUSTER SLOTS: a slot range is not [start, end, [host, port]]");
        return -1;
    }
    long long start = r->element[0]->integer, end = r->element[1]->integer;
    long long port = r->element[2]->element[1]->integer;
    const char *host = r->element[2]->element[0]->str;
    if (start < 0 || end >= CLUSTER_SLOTS || start > end || port < 1 || port > 65535) {
        snprintf(err, errlen, "CLUSTER SLOTS: range %lld-%lld of port %lld is out of bounds",
                 start, end, port);
        return -1;
    }
    int node = cluster_map_node(m, *host ? host : asked_host, (int)port);
    if (node < 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (long long s = start; s <= end; s++)
        m->slot[s] = (uint16_t)node;
    return 0;
}

int cluster_map_load(struct cluster_map *m, const redisReply *reply, const char *asked_host,
                     char *err, size_t errlen)
{
    if (!reply || reply->type != REDIS_REPLY_ARRAY) {
        snprintf(err, errlen, "CLUSTER SLOTS: %s",
                 reply && reply->type == REDIS_REPLY_ERROR ? reply->str : "not an array");
        return -1;
    }
    struct cluster_map fresh;
    cluster_map_init(&fresh);
    for (size_t i = 0; i < reply->elements; i++)
        if (load_range(&fresh, reply->element[i], asked_host, err, errlen) < 0) {
            cluster_map_free(&fresh);
            return -1;
        }
    cluster_map_free(m);
    *m = fresh;
    return 0;
}

int cluster_parse_redirect(const char *err, unsigned *slot, char *host, size_t hostlen,
                           int *port)
{
    int kind;
    if (strncmp(err, "MOVED ", 6) == 0)
        kind = CLUSTER_MOVED;
    else if (strncmp(err, "ASK ", 4) == 0)
        kind = CLUSTER_ASK;
    else
        return 0;
    const char *p = strchr(err, ' ') + 1;
    char *end;
    unsigned long s = strtoul(p, &end, 10);
    if (end == p || *end != ' ' || s >= CLUSTER_SLOTS)
        return 0;
    const char *addr = end + 1;
    const char *colon = strrchr(addr, ':');
    if (!colon || colon == addr || (size_t)(colon - addr) >= hostlen)
        return 0;
    long pt = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || pt < 1 || pt > 65535)
        return 0;
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    *slot = (unsigned)s;
    *port = (int)pt;
    return kind;
}
