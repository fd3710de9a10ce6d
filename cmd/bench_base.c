/* bench_base.c — mge-bench --baseline (see bench_base.h). */
#include "bench_base.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *bench_key_name(const char *path)
{
    if (strcmp(path, "-") == 0)
        return "<stdin>";
    const char *slash = strrchr(path, '/');
    return slash && slash[1] ? slash + 1 : path;
}

static int number_field(const bj *o, const char *key, double *v)
{
    const bj *x = bj_get(o, key);
    if (!x || x->type != BJ_NUM || !isfinite(x->num))
        return -1;
    *v = x->num;
    return 0;
}

int bench_base_load(const char *path, bench_base *b)
{
    memset(b, 0, sizeof *b);
    b->path = path;
    const char *fn = cli_name(path);
    void *buf = NULL;
    size_t n = 0;
    int mapped = 0;
    if (cli_slurp(path, &buf, &n, &mapped))
        return -1;
    char msg[256];
    int rc = bj_parse(buf, n, &b->root, msg, sizeof msg);
    mge_file_unslurp(buf, n, mapped);
    if (rc) {
        cli_error(fn, "malformed baseline (not JSON): %s", msg);
        return -1;
    }
    const bj *tool = bj_get(&b->root, "tool");
    if (b->root.type != BJ_OBJ || !tool || tool->type != BJ_STR || strcmp(tool->str, "mge-bench") != 0) {
        cli_error(fn, "malformed baseline: not an mge-bench --json result (no \"tool\": \"mge-bench\")");
        return -1;
    }
    const bj *cfg = bj_get(&b->root, "config"), *train = bj_get(cfg, "train");
    if (train && train->type != BJ_BOOL) {
        cli_error(fn, "malformed baseline: config.train is not true or false");
        return -1;
    }
    b->train = train && train->num != 0;
    const bj *mach = bj_get(&b->root, "machine"), *cpu = bj_get(mach, "cpu"), *cores = bj_get(mach, "cores");
    b->cpu = cpu && cpu->type == BJ_STR ? cpu->str : NULL;
    b->cores = cores && cores->type == BJ_NUM ? cores->num : 0;
    const bj *res = bj_get(&b->root, "results");
    if (!res || res->type != BJ_ARR) {
        cli_error(fn, "malformed baseline: no \"results\" array");
        return -1;
    }
    b->rows = calloc((size_t)res->n + 1, sizeof *b->rows);
    if (!b->rows) {
        cli_error(NULL, "out of memory");
        return -1;
    }
    for (int i = 0; i < res->n; i++) {
        const bj *r = &res->items[i], *m = bj_get(r, "model"), *sh = bj_get(r, "shapes"), *g = bj_get(r, "gate_ms");
        double th, ba, ms;
        /* gate_ms when the baseline has it (null: a row without runs), else the older p50_ms */
        const char *stat = g ? "gate_ms" : "p50_ms";
        const char *bad = !m || m->type != BJ_STR                               ? "a \"model\" string"
                          : sh && sh->type != BJ_STR                             ? "\"shapes\" as a string"
                          : number_field(r, "threads", &th) || th < 1 || th > 256 ? "\"threads\" (1..256)"
                          : number_field(r, "batch", &ba) || ba < 1 || ba > 1e15  ? "\"batch\" (a positive number)"
                          : number_field(r, stat, &ms) || ms < 0                  ? (g ? "\"gate_ms\" (a number >= 0)"
                                                                                       : "\"p50_ms\" (a number >= 0)")
                                                                                  : NULL;
        if (bad) {
            cli_error(fn, "malformed baseline: results[%d] lacks %s", i, bad);
            return -1;
        }
        const bj *nm = bj_get(r, "name");
        b->rows[b->n++] = (base_row){nm && nm->type == BJ_STR ? nm->str : bench_key_name(m->str),
                                     sh ? sh->str : NULL, (int)th, (int64_t)ba, ms};
    }
    return 0;
}

void bench_base_free(bench_base *b)
{
    bj_free(&b->root);
    free(b->rows);
    memset(b, 0, sizeof *b);
}

int bench_base_threads(const bench_base *b, int *threads, int max)
{
    int n = 0;
    for (int i = 0; i < b->n; i++) {
        int k = 0;
        while (k < n && threads[k] != b->rows[i].threads)
            k++;
        if (k == n && n < max)
            threads[n++] = b->rows[i].threads;
    }
    return n;
}

int bench_base_machine_check(const bench_base *b, const char *cpu, long cores)
{
    int cpu_differs = b->cpu && strcmp(b->cpu, cpu) != 0, cores_differ = b->cores > 0 && (long)b->cores != cores;
    if (!cpu_differs && !cores_differ)
        return 0;
    cli_warn(cli_name(b->path), "recorded on another machine (%s, %.0f cores; this one: %s, %ld cores): the times may not compare",
             b->cpu ? b->cpu : "unknown", b->cores, cpu, cores);
    return 1;
}

static int key_eq(const base_row *r, const bench_key *k)
{
    if (strcmp(r->name, k->name) != 0 || r->threads != k->threads)
        return 0;
    return r->shapes ? strcmp(r->shapes, k->shapes) == 0 : r->batch == k->batch;
}

static const base_row *find(const bench_base *b, const bench_key *k)
{
    for (int i = 0; i < b->n; i++)
        if (key_eq(&b->rows[i], k))
            return &b->rows[i];
    return NULL;
}

int bench_base_match(const bench_base *b, int train, const bench_key *rows, int n)
{
    const char *fn = cli_name(b->path);
    if (b->train != train) {
        cli_error(fn, "baseline from another configuration: it times %s, this run %s", b->train ? "training" : "inference",
                  train ? "training (--train)" : "inference");
        return -1;
    }
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < i; j++)
            if (strcmp(rows[i].name, rows[j].name) == 0 && strcmp(rows[i].shapes, rows[j].shapes) == 0 &&
                rows[i].threads == rows[j].threads) {
                cli_error(NULL, "%s and %s share a baseline key (file name %s, threads %d, %s): give the models different file names",
                          rows[j].model, rows[i].model, rows[i].name, rows[i].threads, rows[i].shapes);
                return -1;
            }
        if (find(b, &rows[i]))
            continue;
        char list[512];
        size_t k = 0;
        list[0] = 0;
        for (int j = 0; j < b->n && k < sizeof list; j++) {
            int w = b->rows[j].shapes ? snprintf(list + k, sizeof list - k, "%s%s (threads %d, %s)", j ? ", " : "",
                                                 b->rows[j].name, b->rows[j].threads, b->rows[j].shapes)
                                      : snprintf(list + k, sizeof list - k, "%s%s (threads %d, batch %lld)",
                                                 j ? ", " : "", b->rows[j].name, b->rows[j].threads,
                                                 (long long)b->rows[j].batch);
            if (w < 0)
                break;
            k += (size_t)w;
        }
        cli_error(fn, "baseline from another model or configuration: no result for %s (threads %d, %s); it has %s",
                  rows[i].name, rows[i].threads, rows[i].shapes, b->n ? list : "no results");
        return -1;
    }
    return 0;
}

int bench_base_compare(const bench_base *b, double max_reg, const bench_key *rows, int n)
{
    int bad = 0;
    const char *fn = cli_name(b->path);
    for (int i = 0; i < n; i++) {
        const base_row *r = find(b, &rows[i]);
        if (!r)
            continue;
        double cur = rows[i].gate_ms, limit = r->gate_ms * (1 + max_reg / 100);
        double change = r->gate_ms > 0 ? (cur / r->gate_ms - 1) * 100 : INFINITY;
        if (cur > limit) {
            cli_error(NULL, "%s (threads %d, %s): %.4g ms against %.4g ms in %s (%+.1f%%, more than the allowed %g%%)",
                      rows[i].name, rows[i].threads, rows[i].shapes, cur, r->gate_ms, fn, change, max_reg);
            bad++;
        } else if (cli_verbose >= 0) {
            fprintf(stderr, "%s: %s (threads %d, %s): %.4g ms against %.4g ms in %s (%+.1f%%, within %g%%)\n",
                    cli_prog, rows[i].name, rows[i].threads, rows[i].shapes, cur, r->gate_ms, fn, change, max_reg);
        }
    }
    return bad;
}
