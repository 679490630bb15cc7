/*
 * Redis Cluster's routing facts, shared by the library's blocking client
 * and the daemon's async connections: which hash slot a key is in (CRC16
 * of its hash tag, as the Cluster spec gives it), which master serves a
 * slot (the map read from CLUSTER SLOTS), and what a MOVED or ASK
 * redirection says.  No I/O here: the callers own the connections.  What
 * to do about a reply is redis/cluster_policy.h.
 */
#ifndef DQ_CLUSTER_MAP_H
#define DQ_CLUSTER_MAP_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

#define CLUSTER_SLOTS 16384
#define CLUSTER_NO_NODE 0xffff
#define CLUSTER_HOST_MAX 256

/* CRC16 (XMODEM), the checksum Redis Cluster hashes keys with. */
uint16_t cluster_crc16(const char *buf, size_t len);

/* The hash slot of `key`: CRC16 of the part between the first '{' and the
 * next '}' when that part is not empty, else of the whole key, mod 16384. */
unsigned cluster_keyslot(const char *key, size_t len);

/* A master as the map names it. */
struct cluster_node {
    char host[CLUSTER_HOST_MAX];
    int port;
};

/* The slot map: the masters, and for each slot the index of its master in
 * nodes[] (CLUSTER_NO_NODE: no master serves it). */
struct cluster_map {
    struct cluster_node *nodes;
    size_t nnodes;
    uint16_t slot[CLUSTER_SLOTS];
};

void cluster_map_init(struct cluster_map *m);
void cluster_map_free(struct cluster_map *m);

/*
 * Replace `m` with the map in `reply`, a CLUSTER SLOTS reply; a master
 * announced with an empty host (cluster-announce-ip unset and the node
 * not knowing its own address) is taken to be at `asked_host`, the node
 * that answered.  0, or -1 with one line in err (the reply is not a slot
 * map, or memory ran out); `m` is then left as it was.
 */
int cluster_map_load(struct cluster_map *m, const redisReply *reply, const char *asked_host,
                     char *err, size_t errlen);

/* The index in m->nodes of HOST:PORT, adding it when new: -1 when memory
 * ran out. */
int cluster_map_node(struct cluster_map *m, const char *host, int port);

/* The master's index for `slot`, or CLUSTER_NO_NODE. */
unsigned cluster_map_lookup(const struct cluster_map *m, unsigned slot);

/*
 * Read a redirection error ("MOVED 3999 127.0.0.1:6381", "ASK 3999
 * 127.0.0.1:6381").  Returns 1 for MOVED, 2 for ASK, 0 for anything else
 * (other errors, a malformed address), with the slot and the target
 * filled on 1 or 2.
 */
#define CLUSTER_MOVED 1
#define CLUSTER_ASK 2
int cluster_parse_redirect(const char *err, unsigned *slot, char *host, size_t hostlen,
                           int *port);

#endif
