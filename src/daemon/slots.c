#include "daemon/slots.h"

#include <string.h>
#include <sys/mman.h>
#include <time.h>

struct worker_slot *slots_create(size_t n)
{
    void *p = mmap(NULL, n * sizeof(struct worker_slot), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void slots_destroy(struct worker_slot *s, size_t n)
{
    if (s)
        munmap(s, n * sizeof *s);
}

void slot_set_job(struct worker_slot *s, const struct slot_job *job)
{
    __atomic_add_fetch(&s->seq, 1, __ATOMIC_ACQ_REL);
    if (job)
        s->job = *job;
    else
        memset(&s->job, 0, sizeof s->job);
    __atomic_add_fetch(&s->seq, 1, __ATOMIC_ACQ_REL);
}

int slot_read_job(const struct worker_slot *s, struct slot_job *out)
{
    for (int tries = 0; tries < 1000; tries++) {
        uint32_t before = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
        if (before & 1)
            continue;
        memcpy(out, &s->job, sizeof *out);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) == before)
            return out->started_ms != 0;
    }
    /* The worker is stuck mid-write (it was killed there): the copy may be
     * torn, so report no job rather than act on a wrong id. */
    memset(out, 0, sizeof *out);
    return 0;
}

int64_t slots_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
