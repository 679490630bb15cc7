/*
 * A small JSON reader for the conformance driver (cases.json), and the
 * value tree the driver also builds its results in (with one type JSON
 * has not: bytes, for payloads).  Numbers are whole (int64): the cases
 * hold no fractions.
 */
#ifndef CONFORMANCE_JSON_H
#define CONFORMANCE_JSON_H

#include <stddef.h>
#include <stdint.h>

enum jtype { J_NULL, J_BOOL, J_INT, J_STR, J_BYTES, J_ARR, J_OBJ };

struct jv {
    enum jtype t;
    int64_t i;              /* J_BOOL, J_INT */
    char *s;                /* J_STR, J_BYTES (NUL-terminated too) */
    size_t len;
    struct jv **items;      /* J_ARR, J_OBJ: the values */
    char **keys;            /* J_OBJ: the keys */
    size_t n;
};

/* Parse `text`; NULL with a one-line reason (and its byte offset) in err. */
struct jv *json_parse(const char *text, char *err, size_t errlen);
void json_free(struct jv *v);

/* Member `key` of an object, or NULL (also when v is not an object). */
struct jv *json_get(const struct jv *v, const char *key);

/* Builders for results (they abort on out of memory: a test program). */
struct jv *jv_null(void);
struct jv *jv_bool(int b);
struct jv *jv_int(int64_t i);
struct jv *jv_str(const char *s);
struct jv *jv_bytes(const void *p, size_t len);
struct jv *jv_arr(void);
struct jv *jv_obj(void);
void jv_push(struct jv *arr, struct jv *item);
void jv_set(struct jv *obj, const char *key, struct jv *item);
struct jv *jv_copy(const struct jv *v);

/* The value as JSON text (bytes as {"hex": ...}), into a malloc'd string. */
char *json_text(const struct jv *v);

#endif
