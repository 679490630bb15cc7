/*
 * Shared by the fuzz targets (tests/fuzz/fuzz_*.c): the libFuzzer entry
 * point each one defines, and the check that turns a broken invariant into
 * a crash the fuzzer records (and the replay test reports).
 */
#ifndef DQ_FUZZ_H
#define DQ_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An invariant of the code under test: abort, naming it, when it fails. */
#define FUZZ_ASSERT(cond)                                                       \
    do {                                                                        \
        if (!(cond)) {                                                          \
            fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, \
                    #cond);                                                     \
            abort();                                                            \
        }                                                                       \
    } while (0)

#endif
