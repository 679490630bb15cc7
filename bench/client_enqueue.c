/*
 * client-enqueue: N jobs through libdelayq, one dq_enqueue at a time or in
 * one dq_enqueue_many, for bench/clients-enqueue.py, which runs the same
 * load through the other clients and reads Redis's own time per job.
 *
 *   client-enqueue SOCKET one|bulk N
 *
 * Each job: queue "bench", type "bench", the bench's 32-byte payload, due
 * in 30 minutes, a generated id.  Prints the seconds the N jobs took.
 * Exit 0, 1 when a call failed (its message on stderr), 64 on usage.
 */
#include <delayq/client.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    static const char payload[] = "0123456789abcdef0123456789abcdef";
    long n = argc == 4 ? strtol(argv[3], NULL, 10) : 0;
    if (n < 1 || (strcmp(argv[2], "one") != 0 && strcmp(argv[2], "bulk") != 0)) {
        fprintf(stderr, "usage: client-enqueue SOCKET one|bulk N\n");
        return 64;
    }
    dq_options opt;
    dq_options_init(&opt);
    opt.unix_path = argv[1];
    char err[256];
    dq_client *c = dq_connect(&opt, err, sizeof err, NULL);
    if (!c) {
        fprintf(stderr, "client-enqueue: %s\n", err);
        return 1;
    }
    dq_enqueue_req *reqs = calloc((size_t)n, sizeof *reqs);
    for (long i = 0; i < n; i++)
        reqs[i] = (dq_enqueue_req){ .queue = "bench", .type = "bench", .payload = payload,
                                    .payload_len = 32, .delay_ms = 30 * 60 * 1000 };
    dq_status st = DQ_OK;
    double t0 = now_s();
    if (strcmp(argv[2], "one") == 0)
        for (long i = 0; i < n && st == DQ_OK; i++)
            st = dq_enqueue(c, &reqs[i], NULL);
    else
        st = dq_enqueue_many(c, reqs, (size_t)n, NULL, NULL);
    double t = now_s() - t0;
    if (st != DQ_OK)
        fprintf(stderr, "client-enqueue: %s\n", dq_errmsg(c));
    else
        printf("%.6f\n", t);
    free(reqs);
    dq_close(c);
    return st == DQ_OK ? 0 : 1;
}
