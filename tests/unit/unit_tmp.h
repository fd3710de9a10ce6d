/* unit_tmp.h — a scratch directory for the unit tests that write files:
 * unit_tmp_make("name") in main() before the tests, tmp("file") for a path
 * in it, write_file() to fill one, unit_tmp_remove() at the end. */
#ifndef MGE_UNIT_TMP_H
#define MGE_UNIT_TMP_H
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "unit.h"

static char tmpdir[256];

/* A path in the scratch directory; the last four stay valid. */
static const char *tmp(const char *name)
{
    static char b[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(b[k], sizeof b[k], "%s/%s", tmpdir, name);
    return b[k];
}

static int unit_tmp_rm(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st, (void)flag, (void)f;
    return remove(p);
}

/* 0, or -1 (said on stderr) when no directory could be made. */
static int unit_tmp_make(const char *name)
{
    snprintf(tmpdir, sizeof tmpdir, "%s/mge-%s-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", name);
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return -1;
    }
    return 0;
}

static void unit_tmp_remove(void)
{
    nftw(tmpdir, unit_tmp_rm, 16, FTW_DEPTH | FTW_PHYS);
}

static void write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f)
        return;
    CHECK(fwrite(p, 1, n, f) == n);
    fclose(f);
}
#endif
