/*
 * Inside ui_data: an operation (one call of ui_data.h) and its requests,
 * shared by ui_data.c (the operations, their sending and their ends, the
 * job view, schedules and actions) and ui_data_page.c (the pages of a
 * queue's lists, and their merge over partitions).
 */
#ifndef DQ_UI_DATA_OP_H
#define DQ_UI_DATA_OP_H

#include <hiredis/hiredis.h>

#include "daemon/admin/ui_data_types.h"
#include "lib/cmd.h"
#include "lib/keys.h"

struct daemon_conf;
struct queue_conf;
struct rconn;

struct ui_data {
    const struct daemon_conf *dc;
    struct rconn *conn;
    int freeing;
    char refused[600];          /* why the last call could not be sent */
};

enum op_kind { OP_PAGE, OP_SHOW, OP_SCHEDULES, OP_ACTION };

/* One partition's first step of a merged page. */
struct part_head {
    char **ids;
    int64_t *at;
    size_t n;
    size_t next;
};

struct ui_op;
struct ui_sub;

/*
 * What an operation of OP_PAGE does at each turn, set by ui_data_page.c:
 * through these pointers ui_data.c drives pages without depending on the
 * module that makes them (which depends on it).
 */
struct ui_op_hooks {
    /* The command of request `s`. */
    enum dq_script_id (*cmd)(const struct ui_op *op, const struct ui_sub *s, struct cmd *c,
                             const struct queue_keys *k);
    /* Take a usable reply to `s`. */
    void (*reply)(struct ui_op *op, struct ui_sub *s, const redisReply *r);
    /* After the last reply of a step: 1 when a next step's requests went. */
    int (*next_step)(struct ui_op *op);
    /* Before the callback of an operation that succeeded. */
    void (*seal)(struct ui_op *op);
    /* Free what the operation holds of its own. */
    void (*free)(struct ui_op *op);
};

struct ui_op {
    struct ui_data *d;
    enum op_kind kind;
    const struct ui_op_hooks *hooks; /* OP_PAGE's; NULL for the others */
    const struct queue_conf *q;
    unsigned nparts;
    size_t outstanding;         /* requests sent and not answered */
    dq_status st;               /* the first failure, or DQ_OK */
    char err[600];              /* a cluster's last failure is up to 480 */
    void *arg;
    union {
        ui_page_fn page;
        ui_show_fn show;
        ui_schedules_fn schedules;
        ui_action_fn action;
    } fn;
    /* OP_PAGE */
    enum ui_list which;
    int64_t offset;
    int count;
    char *type;
    int merging;                /* N > 1 and in the second step */
    struct part_head *heads;    /* the first step's, per partition */
    unsigned *slot_part;        /* the partition of page entry i ... */
    const char **slot_id;       /* ... and its id (in heads), or NULL */
    struct ui_page page;
    /* OP_SHOW, one-job actions */
    char *id;
    dq_job_info info;
    /* OP_SCHEDULES */
    dq_schedule_list list;
    /* OP_ACTION */
    enum ui_action act;
    int64_t done;
};

/* One request of an operation: the partition it went to, and for the
 * second step of a page the ids asked for. */
struct ui_sub {
    struct ui_op *op;
    unsigned part;
    const char **ids;
    size_t nids;
};

/* Record why the operation fails; the first reason wins. */
void ui_data_op_fail(struct ui_op *op, dq_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void ui_data_op_bad_reply(struct ui_op *op, const char *script);

/* A new operation of `kind` on queue `q` (NULL when out of memory), and
 * its end without a callback (a call that sent nothing). */
/* A new operation of d (NULL when out of memory); every call starts one,
 * and a refusal it meets is its own (ui_data_refusal). */
struct ui_op *ui_data_op_new(struct ui_data *d, enum op_kind kind,
                             const struct queue_conf *q, void *arg);

/* A call refused before it began (d closing, or arguments it cannot
 * take): say so in d's refusal; -1. */
int ui_data_call_refused(struct ui_data *d);
void ui_data_op_free(struct ui_op *op);

/* Send op's request to every partition of its queue: 0 when at least one
 * went (the operation then ends by its replies), -1 when none did (op is
 * freed, its callback never runs). */
int ui_data_op_start_all(struct ui_op *op);

/* A request to partition `part` (NULL when out of memory); sending it (0,
 * its reply then comes once) or not (-1: it is still the caller's, and
 * the operation is marked failed with why). */
struct ui_sub *ui_data_sub_new(struct ui_op *op, unsigned part);
int ui_data_sub_send(struct ui_sub *s);
void ui_data_sub_free(struct ui_sub *s);

#endif
