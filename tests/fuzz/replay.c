/*
 * The fuzz targets without libFuzzer: runs a target's entry point once on
 * each file of its seed corpus (tests/fuzz/corpus/NAME) and of its
 * regression inputs (tests/fuzz/regress/NAME: every crash the fuzzer
 * found), so that 'make check', with any compiler and in the sanitizer
 * build, shows each input still handled.  A broken invariant aborts.
 *
 * Usage: replay-NAME [FILE|DIR]...  With no argument, the two directories
 * under $srcdir (as 'make check' sets it; "." otherwise).  NAME comes from
 * the build (FUZZ_NAME).
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

#ifndef FUZZ_NAME
#error "FUZZ_NAME: the target's name, as its corpus directory is named"
#endif

/* Defined by the targets that need set-up (weak: the others do not). */
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

/* Read all of `path`; NULL (and a message) when it cannot be read. */
static uint8_t *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return NULL;
    }
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    int bad = 0;
    while (!bad) {
        if (len == cap) {
            uint8_t *grown = realloc(buf, cap = cap ? 2 * cap : 4096);
            bad = !grown;
            if (bad)
                break;
            buf = grown;
        }
        size_t n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0)
            break;
    }
    bad |= ferror(f);
    fclose(f);
    if (bad) {
        fprintf(stderr, "replay: %s: cannot read it\n", path);
        free(buf);
        return NULL;
    }
    *size = len;
    return buf;
}

static int replay_file(const char *path)
{
    size_t size;
    uint8_t *data = read_file(path, &size);
    if (!data)
        return -1;
    LLVMFuzzerTestOneInput(data, size);
    free(data);
    return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

/* Each file of `dir` in name order; the count, or -1 when one failed. */
static int replay_dir(const char *dir)
{
    struct dirent **names;
    int n = scandir(dir, &names, NULL, by_name), count = 0, failed = 0;
    if (n < 0) {
        fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
        return -1;
    }
    for (int i = 0; i < n; i++) {
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
        if (names[i]->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            if (replay_file(path) < 0)
                failed = 1;
            count++;
        }
        free(names[i]);
    }
    free(names);
    return failed ? -1 : count;
}

/* A file or each file of a directory; the count, or -1.  An `optional`
 * path that does not exist counts 0. */
static int replay_path(const char *path, int optional)
{
    struct stat st;
    if (stat(path, &st) < 0) {
        if (optional && errno == ENOENT)
            return 0;
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (S_ISDIR(st.st_mode))
        return replay_dir(path);
    return replay_file(path) < 0 ? -1 : 1;
}

int main(int argc, char **argv)
{
    char corpus[4096], regress[4096];
    const char *srcdir = getenv("srcdir");
    const char *defaults[] = { corpus, regress };
    const char *const *paths = (const char *const *)argv + 1;
    int npaths = argc - 1, failed = 0;
    if (LLVMFuzzerInitialize)
        LLVMFuzzerInitialize(&argc, &argv);
    if (npaths == 0) {
        srcdir = srcdir && *srcdir ? srcdir : ".";
        snprintf(corpus, sizeof corpus, "%s/tests/fuzz/corpus/%s", srcdir, FUZZ_NAME);
        snprintf(regress, sizeof regress, "%s/tests/fuzz/regress/%s", srcdir, FUZZ_NAME);
        paths = defaults;
        npaths = 2;
    }
    for (int i = 0; i < npaths; i++) {
        /* A target with no crash found yet has no regression inputs. */
        int n = replay_path(paths[i], paths == defaults && i == 1);
        if (n < 0)
            failed = 1;
        else
            printf("%s: replayed %d input%s from %s\n", FUZZ_NAME, n, n == 1 ? "" : "s",
                   paths[i]);
    }
    return failed ? 1 : 0;
}
