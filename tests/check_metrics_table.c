/*
 * The supervisor's shared totals (src/daemon/admin/metrics_table.c) under
 * concurrent use by separate processes, as in delayqd: one writer (the
 * supervisor) folding exited workers' slots into the totals and zeroing
 * the slots, a worker counting into its slot, and readers (admin
 * processes) taking snapshots all along.  No snapshot may see a total go
 * back, and the last one sees every job.  Then a reader killed with
 * SIGKILL mid-read leaves nothing for the next one to trip on.
 */
#include <check.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon/admin/metrics.h"
#include "fixture.h"
#include "testutil.h"

#define ROUNDS 400              /* worker lives */
#define JOBS_PER_LIFE 50
#define READERS 2

struct shared {
    volatile int done;          /* the writer has finished */
};

/* One worker life: JOBS_PER_LIFE jobs counted one by one into slot 0. */
static void worker_life(struct worker_slot *slot)
{
    struct slot_type *e = slot_type_entry(slot, "t");
    for (int j = 0; j < JOBS_PER_LIFE; j++)
        slot_add(&e->counters.succeeded, 1);
}

/* The supervisor and its worker: each life ends as children_collect ends
 * it (fold, zero, row not running, in one change), and a new one starts. */
static void writer(struct metrics *m, struct worker_slot *slots)
{
    for (int r = 0; r < ROUNDS; r++) {
        metrics_post_child(m, 0, MR_WORKER, 1000 + r, 1, "q");
        worker_life(&slots[0]);
        metrics_begin(m);
        metrics_fold_slot(m, "q", &slots[0]);
        slot_reset(&slots[0]);
        metrics_post_child(m, 0, MR_WORKER, 0, 1, "q");
        metrics_end(m);
    }
}

/* An admin process: snapshots until the writer is done; exits with the
 * number of snapshots that saw the total go back (0 expected). */
static int reader(const struct metrics *m, const struct worker_slot *slots,
                  const struct shared *sh)
{
    uint64_t last = 0;
    int back = 0, taken = 0;
    while (!sh->done || taken == 0) {
        struct metrics_snap *snap = metrics_snap_take(m, slots);
        if (!snap)
            continue;
        struct ui_totals t;
        metrics_queue_totals(snap, "q", &t);
        metrics_snap_free(snap);
        back += t.succeeded < last;
        last = t.succeeded;
        taken++;
    }
    return back > 100 ? 100 : back;
}

START_TEST(no_snapshot_sees_a_total_go_back)
{
    struct metrics *m = metrics_new();
    struct worker_slot *slots = slots_create(2);
    struct shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
                             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_nonnull(m);
    ck_assert_ptr_nonnull(slots);
    ck_assert_ptr_ne(sh, MAP_FAILED);
    pid_t readers[READERS];
    for (int i = 0; i < READERS; i++) {
        readers[i] = fork();
        ck_assert_int_ge(readers[i], 0);
        if (readers[i] == 0) {
            ck_assert_int_eq(metrics_seal(m), 0);
            _exit(reader(m, slots, sh));
        }
    }
    pid_t w = fork();
    ck_assert_int_ge(w, 0);
    if (w == 0) {
        writer(m, slots);
        sh->done = 1;
        _exit(0);
    }
    int status;
    ck_assert_int_eq(waitpid(w, &status, 0), w);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    for (int i = 0; i < READERS; i++) {
        ck_assert_int_eq(waitpid(readers[i], &status, 0), readers[i]);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "reader %d: %d snapshots saw the total go back", i,
                      WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
    struct metrics_snap *snap = metrics_snap_take(m, slots);
    ck_assert_ptr_nonnull(snap);
    struct ui_totals t;
    metrics_queue_totals(snap, "q", &t);
    ck_assert_uint_eq(t.succeeded, (uint64_t)ROUNDS * JOBS_PER_LIFE);
    metrics_snap_free(snap);

    /* A reader killed mid-read changes nothing the writer or the next
     * reader depends on (readers write nothing). */
    pid_t r = fork();
    ck_assert_int_ge(r, 0);
    if (r == 0) {
        sh->done = 0;
        _exit(reader(m, slots, sh));
    }
    tu_sleep_ms(20);
    kill(r, SIGKILL);
    ck_assert_int_eq(waitpid(r, &status, 0), r);
    metrics_count_restart(m);
    snap = metrics_snap_take(m, slots);
    ck_assert_ptr_nonnull(snap);
    ck_assert_uint_eq(snap->restarts, 1);
    metrics_snap_free(snap);
    munmap(sh, sizeof *sh);
    slots_destroy(slots, 2);
    metrics_free(m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("metrics_table");
    TCase *tc = fixture_tcase(s, "shared", 60, NULL, NULL, NULL, NULL);
    tcase_add_test(tc, no_snapshot_sees_a_total_go_back);
    return fixture_run_suite(s);
}
