/*
 * The C side of bench/producers/run.py: enqueue N jobs through libdelayq,
 * one call at a time or in bulk calls of BULK jobs, with the protocol the
 * other producers of that bench follow (README there): connect and warm up,
 * print "ready", wait for a line on standard input, enqueue, print the
 * seconds the enqueueing took.
 *
 *   delayq-producer-bench SOCKET|HOST:PORT N one|bulk
 */
#include <delayq/client.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BULK 1000
#define DELAY_MS (30 * 60 * 1000)

static const char PAYLOAD[] = "{\"order\":1234}";

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void fill_req(dq_enqueue_req *r)
{
    memset(r, 0, sizeof *r);
    r->queue = "bench";
    r->type = "order.cancel";
    r->payload = PAYLOAD;
    r->payload_len = sizeof PAYLOAD - 1;
    r->delay_ms = DELAY_MS;
}

static int enqueue_one_by_one(dq_client *c, long n)
{
    dq_enqueue_req r;
    fill_req(&r);
    for (long i = 0; i < n; i++)
        if (dq_enqueue(c, &r, NULL) != DQ_OK) {
            fprintf(stderr, "enqueue: %s\n", dq_errmsg(c));
            return -1;
        }
    return 0;
}

static int enqueue_bulk(dq_client *c, long n)
{
    static dq_enqueue_req reqs[BULK];
    for (int i = 0; i < BULK; i++)
        fill_req(&reqs[i]);
    for (long done = 0; done < n; done += BULK) {
        size_t k = (size_t)(n - done < BULK ? n - done : BULK);
        if (dq_enqueue_many(c, reqs, k, NULL, NULL) != DQ_OK) {
            fprintf(stderr, "enqueue_many: %s\n", dq_errmsg(c));
            return -1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 4 || (strcmp(argv[3], "one") && strcmp(argv[3], "bulk"))) {
        fprintf(stderr, "usage: delayq-producer-bench SOCKET|HOST:PORT N one|bulk\n");
        return 2;
    }
    long n = strtol(argv[2], NULL, 10);
    dq_options opt;
    dq_options_init(&opt);
    char host[256];
    const char *colon = strrchr(argv[1], ':');
    if (argv[1][0] == '/') {
        opt.unix_path = argv[1];
    } else if (colon && (size_t)(colon - argv[1]) < sizeof host) {
        memcpy(host, argv[1], (size_t)(colon - argv[1]));
        host[colon - argv[1]] = '\0';
        opt.host = host;
        opt.port = atoi(colon + 1);
    } else {
        fprintf(stderr, "delayq-producer-bench: %s is neither a socket path nor HOST:PORT\n", argv[1]);
        return 2;
    }
    char err[256];
    dq_client *c = dq_connect(&opt, err, sizeof err, NULL);
    if (!c) {
        fprintf(stderr, "connect: %s\n", err);
        return 1;
    }
    if (enqueue_one_by_one(c, 1) < 0)          /* loads the script */
        return 1;
    printf("ready\n");
    fflush(stdout);
    char line[16];
    if (!fgets(line, sizeof line, stdin))
        return 1;
    double t0 = now_s();
    int rc = strcmp(argv[3], "one") == 0 ? enqueue_one_by_one(c, n) : enqueue_bulk(c, n);
    double t1 = now_s();
    if (rc < 0)
        return 1;
    printf("%.6f\n", t1 - t0);
    dq_close(c);
    return 0;
}
