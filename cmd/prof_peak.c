/* prof_peak.c — the GEMM probe behind mge-prof's "% of peak" and its cache. */
#include "cli.h"
#include "prof_peak.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PROBE_M 512
#define PROBE_SECONDS 0.08   /* per thread count: the probe stays well under 0.5 s */

const char *prof_cpu_model(void)
{
    return cli_cpu_model();   /* tabs already spaces: they separate the cache's fields */
}

const char *prof_peak_path(void)
{
    static char path[4096];
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    /* the XDG spec: a relative XDG_CACHE_HOME is invalid and ignored */
    if (xdg && xdg[0] == '/')
        snprintf(path, sizeof path, "%s/mge/peak", xdg);
    else if (home && home[0])
        snprintf(path, sizeof path, "%s/.cache/mge/peak", home);
    else
        return NULL;
    return path;
}

/* The cached value for (model, threads), or 0. */
static double cache_lookup(const char *path, const char *model, int threads)
{
    FILE *f = path ? fopen(path, "r") : NULL;
    if (!f)
        return 0;
    char line[512];
    double found = 0;
    while (fgets(line, sizeof line, f)) {
        char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        if (!t2)
            continue;
        *t1 = 0;
        char *end;
        long th = strtol(t1 + 1, &end, 10);
        double v = strtod(t2 + 1, NULL);
        if (end == t2 && th == threads && strcmp(line, model) == 0 && v > 0)
            found = v;
    }
    fclose(f);
    return found;
}

static int mkdirs(char *dir)
{
    for (char *s = dir + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = 0;
        int r = mkdir(dir, 0755);
        *s = '/';
        if (r && errno != EEXIST)
            return -1;
    }
    return mkdir(dir, 0755) && errno != EEXIST ? -1 : 0;
}

/* Rewrites the cache with (model, threads) set to v: a temporary file in the
 * same directory renamed over it, so concurrent tools never see half a file.
 * Any failure leaves the cache as it was. */
static void cache_store(const char *path, const char *model, int threads, double v)
{
    if (!path)
        return;
    char dir[4096], tmp[4200];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        return;
    *slash = 0;
    if (mkdirs(dir))
        return;
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *out = fopen(tmp, "w");
    if (!out)
        return;
    FILE *in = fopen(path, "r");
    char line[512];
    while (in && fgets(line, sizeof line, in)) {
        char key[512];
        snprintf(key, sizeof key, "%s\t%d\t", model, threads);
        if (strncmp(line, key, strlen(key)) != 0 && strchr(line, '\n'))
            fputs(line, out);
    }
    if (in)
        fclose(in);
    fprintf(out, "%s\t%d\t%.3f\n", model, threads, v);
    if (fclose(out) || rename(tmp, path))
        unlink(tmp);
}

/* Best GFLOP/s of a PROBE_M^3 matmul on an executor with `threads`. */
static double probe(int threads)
{
    mge_error err;
    mge_error_clear(&err);
    const int64_t dims[2] = {PROBE_M, PROBE_M};
    mge_graph *g = mge_graph_new();
    mge_exec *e = NULL;
    mge_tensor a = {0}, b = {0};
    double best = 0;
    int in[2];
    const char *outname = "c";
    mge_exec_opts eo = {0};
    eo.threads = threads;
    if (!g || (in[0] = mge_graph_add_value(g, "a", MGE_VAL_INPUT, MGE_F32, 2, dims, &err)) < 0 ||
        (in[1] = mge_graph_add_value(g, "b", MGE_VAL_INPUT, MGE_F32, 2, dims, &err)) < 0 ||
        mge_graph_add_node(g, "c", MGE_OP_MATMUL, 2, in, 0, NULL, 1, &outname, &err) < 0 ||
        mge_graph_add_output(g, mge_graph_find(g, "c"), &err) || mge_exec_create(g, &eo, &e, &err) ||
        mge_tensor_alloc(&a, MGE_F32, 2, dims, &err) || mge_tensor_alloc(&b, MGE_F32, 2, dims, &err))
        goto done;
    float *pa = a.data, *pb = b.data;
    for (int64_t i = 0; i < PROBE_M * PROBE_M; i++) {
        pa[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
        pb[i] = (float)((i * 5) % 11) / 11.0f - 0.5f;
    }
    const mge_tensor *args[2] = {&a, &b};
    if (mge_exec_run(e, args, &err))   /* warm-up: plan, arena, caches */
        goto done;
    double flops = 2.0 * PROBE_M * PROBE_M * PROBE_M, t_end = mge_now() + PROBE_SECONDS;
    for (int r = 0; r < 3 || mge_now() < t_end; r++) {
        double t0 = mge_now();
        if (mge_exec_run(e, args, &err))
            goto done;
        double dt = mge_now() - t0;
        if (dt > 0 && flops / dt / 1e9 > best)
            best = flops / dt / 1e9;
    }
done:
    if (err.msg[0]) {
        cli_note(NULL, "GEMM probe: %s", err.msg);
        best = 0;
    }
    mge_tensor_free(&a);
    mge_tensor_free(&b);
    mge_exec_free(e);
    mge_graph_free(g);
    return best;
}

double prof_peak(int threads, int *cached)
{
    const char *path = prof_peak_path(), *model = prof_cpu_model();
    double v = cache_lookup(path, model, threads);
    *cached = v > 0;
    if (v > 0)
        return v;
    v = probe(threads);
    if (v > 0)
        cache_store(path, model, threads, v);
    return v;
}
