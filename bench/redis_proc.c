#include "config.h"

#include "bench/redis_proc.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "bench/bench.h"
#include "tests/testutil.h"

redisContext *redis_proc_connect(const struct redis_proc *r, char *err, size_t errlen)
{
    return tu_redis_connect(r->sock, 60000, err, errlen);
}

int redis_proc_start(struct redis_proc *r, const char *server, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    if (tu_make_temp_dir("dqbench", r->dir, sizeof r->dir, err, errlen) < 0)
        return -1;
    snprintf(r->sock, sizeof r->sock, "%s/redis.sock", r->dir);
    snprintf(r->log, sizeof r->log, "%s/redis.log", r->dir);
    if (tu_redis_spawn(server, r->dir, r->sock, TU_DIE_WITH_PARENT, &r->pid, err, errlen) < 0) {
        redis_proc_stop(r);
        return -1;
    }
    return 0;
}

void redis_proc_stop(struct redis_proc *r)
{
    tu_stop_process(r->pid, 5000);
    r->pid = 0;
    if (r->dir[0] && bench_keep)
        bench_progress("kept %s", r->dir);
    else if (r->dir[0] && tu_remove_tree(r->dir) < 0)
        bench_progress("could not remove %s: %s", r->dir, strerror(errno));
    r->dir[0] = '\0';
}
