/*
 * The settle board (src/daemon/settle_board.c): what the supervisor posts
 * when a worker dies is a copy of the worker's slot (its tables, the type
 * of the job it ran), taken whole; a full board refuses rather than
 * overwrites; a post is freed only once its settler marked it done, and
 * its outcome is read before; and all of it is seen across fork, as the
 * supervisor and the settler see it.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon/settle_board.h"
#include "daemon/slots.h"
#include "fixture.h"

static struct settle_board *B;
static struct worker_slot *S;

static void setup(void)
{
    B = settle_board_create();
    S = slots_create(1);
    ck_assert(B && S);
}

static void teardown(void)
{
    settle_board_destroy(B);
    slots_destroy(S, 1);
}

/* A worker's slot with `n` jobs claimed from partition 2 (ids j0..), the
 * first running (type "mail"), the second finished. */
static void fill_slot(size_t n)
{
    dq_job jobs[8];
    char ids[8][8];
    ck_assert(n <= 8);
    for (size_t i = 0; i < n; i++) {
        snprintf(ids[i], sizeof ids[i], "j%zu", i);
        jobs[i] = (dq_job){ .id = ids[i], .fence = (int64_t)(100 + i) };
    }
    slot_table_publish(S, 0, 2, jobs, n);
    slot_entry_set(S, 0, 0, SE_RUNNING);
    slot_entry_set(S, 0, 1, SE_OK);
    struct slot_job job = { .fence = 100, .attempt = 1, .started_ms = slots_now_ms() };
    snprintf(job.id, sizeof job.id, "j0");
    snprintf(job.type, sizeof job.type, "mail");
    slot_set_job(S, &job);
}

static struct settle_death death(uint64_t gen)
{
    return (struct settle_death){ .gen = gen, .queue = 1, .who = "w3", .owner = "abc.42",
                                  .cause = "worker died: signal 9", .slot = S };
}

START_TEST(a_post_is_a_whole_copy_of_the_slot)
{
    fill_slot(3);
    struct settle_death d = death(7);
    ck_assert_int_eq(settle_board_post(B, &d), 0);
    const struct settle_post *p = &B->posts[0];
    ck_assert_int_eq(settle_board_state(B, 0), SP_POSTED);
    ck_assert_uint_eq(p->gen, 7);
    ck_assert_int_eq(p->queue, 1);
    ck_assert_str_eq(p->who, "w3");
    ck_assert_str_eq(p->owner, "abc.42");
    ck_assert_str_eq(p->cause, "worker died: signal 9");
    ck_assert_str_eq(p->running_type, "mail");
    ck_assert_uint_eq(p->tables[0].n, 3);
    ck_assert_uint_eq(p->tables[0].part, 2);
    ck_assert_uint_eq(p->tables[1].n, 0);
    ck_assert_str_eq(p->tables[0].e[2].id, "j2");
    ck_assert_int_eq(p->tables[0].e[2].fence, 102);
    ck_assert_int_eq(p->tables[0].e[0].state, SE_RUNNING);
    ck_assert_int_eq(p->tables[0].e[1].state, SE_OK);
    ck_assert_int_eq(p->tables[0].e[2].state, SE_PENDING);
    /* The slot can serve the next worker at once: the post keeps its copy. */
    slot_reset(S);
    fill_slot(1);
    ck_assert_uint_eq(p->tables[0].n, 3);
    ck_assert_str_eq(p->tables[0].e[2].id, "j2");
    ck_assert_int_eq(settle_board_pending(B, 7), 1);
    ck_assert_int_eq(settle_board_pending(B, 8), 0);
}
END_TEST

static int collected;
static int outcome_failed, outcome_dead;

static void on_done(const struct settle_post *p, void *arg)
{
    (void)arg;
    collected++;
    outcome_failed = p->running_failed;
    outcome_dead = p->running_dead;
}

START_TEST(a_full_board_refuses_and_a_done_post_is_freed_after_its_outcome_is_read)
{
    fill_slot(2);
    struct settle_death d = death(1);
    for (int i = 0; i < SETTLE_BOARD_POSTS; i++)
        ck_assert_int_eq(settle_board_post(B, &d), 0);
    ck_assert_int_eq(settle_board_post(B, &d), -1);
    ck_assert_int_eq(settle_board_pending(B, 1), SETTLE_BOARD_POSTS);
    /* Posted but not done: nothing to collect, nothing freed. */
    collected = 0;
    ck_assert_int_eq(settle_board_collect(B, on_done, NULL), 0);
    ck_assert_int_eq(settle_board_post(B, &d), -1);
    settle_board_done(B, 17, 1, 1);
    /* Done but not collected: still the generation's (it is kept). */
    ck_assert_int_eq(settle_board_pending(B, 1), SETTLE_BOARD_POSTS);
    ck_assert_int_eq(settle_board_collect(B, on_done, NULL), 1);
    ck_assert_int_eq(collected, 1);
    ck_assert_int_eq(outcome_failed, 1);
    ck_assert_int_eq(outcome_dead, 1);
    ck_assert_int_eq(settle_board_pending(B, 1), SETTLE_BOARD_POSTS - 1);
    ck_assert_int_eq(settle_board_state(B, 17), SP_FREE);
    ck_assert_int_eq(settle_board_post(B, &d), 0);
    ck_assert_int_eq(settle_board_state(B, 17), SP_POSTED);
}
END_TEST

/* The settler is a forked child: what it writes, the supervisor reads. */
START_TEST(the_board_is_shared_across_fork)
{
    fill_slot(2);
    struct settle_death d = death(3);
    ck_assert_int_eq(settle_board_post(B, &d), 0);
    settle_board_set_in_force(B, 3);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int ok = settle_board_in_force(B) == 3 && settle_board_state(B, 0) == SP_POSTED
                 && strcmp(B->posts[0].tables[0].e[1].id, "j1") == 0;
        settle_board_done(B, 0, 1, 0);
        settle_board_count_failover(B);
        settle_board_count_failover(B);
        _exit(ok ? 0 : 1);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert_int_eq(settle_board_state(B, 0), SP_DONE);
    ck_assert_uint_eq(settle_board_failovers(B), 2);
    collected = 0;
    ck_assert_int_eq(settle_board_collect(B, on_done, NULL), 1);
    ck_assert_int_eq(outcome_failed, 1);
    ck_assert_int_eq(outcome_dead, 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("settle_board");
    TCase *tc = fixture_tcase(s, "board", 10, NULL, NULL, setup, teardown);
    tcase_add_test(tc, a_post_is_a_whole_copy_of_the_slot);
    tcase_add_test(tc, a_full_board_refuses_and_a_done_post_is_freed_after_its_outcome_is_read);
    tcase_add_test(tc, the_board_is_shared_across_fork);
    return fixture_run_suite(s);
}
