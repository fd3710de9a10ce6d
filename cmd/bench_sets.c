/* bench_sets.c — --batch lists and --shape sets for mge-bench (see bench_sets.h). */
#include "bench_sets.h"

#include <stdlib.h>
#include <string.h>

static int in_set(const bench_shapes *set, const char *name, size_t n)
{
    for (int i = 0; i < set->n; i++)
        if (strlen(set->s[i].name) == n && memcmp(set->s[i].name, name, n) == 0)
            return 1;
    return 0;
}

int bench_sets_add_shape(bench_sets *s, const char *arg)
{
    const char *eq = strchr(arg, '=');
    size_t nl = eq ? (size_t)(eq - arg) : strlen(arg);
    /* a name the current set has starts the next set */
    if (s->n == 0 || in_set(&s->set[s->n - 1], arg, nl)) {
        bench_shapes *ns = realloc(s->set, sizeof *ns * (size_t)(s->n + 1));
        if (!ns) {
            cli_error(NULL, "out of memory");
            return -1;
        }
        s->set = ns;
        memset(&s->set[s->n++], 0, sizeof *ns);
    }
    return bench_shape_parse(&s->set[s->n - 1], arg);
}

void bench_sets_batch(bench_sets *s, const char *arg)
{
    s->nbatch = 0;
    const char *p = arg;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        char tok[32];
        if (n == 0 || n >= sizeof tok)
            cli_usage("--batch %s: expected B or a list B,B,...", arg);
        if (s->nbatch == BENCH_MAX_BATCHES)
            cli_usage("--batch %s: more than %d values", arg, BENCH_MAX_BATCHES);
        memcpy(tok, p, n);
        tok[n] = 0;
        int64_t b = cli_long("--batch", tok, 1, 1L << 24);
        for (int i = 0; i < s->nbatch; i++)
            if (s->batch[i] == b)
                cli_usage("--batch %s: %lld given twice", arg, (long long)b);
        s->batch[s->nbatch++] = b;
        if (!comma)
            break;
        p = comma + 1;
    }
}

void bench_sets_check(const bench_sets *s)
{
    if (s->n > 1 && s->nbatch > 1)
        cli_usage("several --batch values and several --shape sets exclude each other");
    for (int k = 1; k < s->n; k++) {
        const bench_shapes *a = &s->set[0], *b = &s->set[k];
        for (int i = 0; i < a->n; i++)
            if (!in_set(b, a->s[i].name, strlen(a->s[i].name)))
                cli_usage("--shape: set %d lacks input '%s' (set 1 has it; every set names the same inputs)", k + 1,
                          a->s[i].name);
        for (int i = 0; i < b->n; i++)
            if (!in_set(a, b->s[i].name, strlen(b->s[i].name)))
                cli_usage("--shape %s: set 1 has no input '%s' (every set names the same inputs)", b->s[i].arg,
                          b->s[i].name);
    }
}

int bench_sets_count(const bench_sets *s)
{
    int n = s->n > s->nbatch ? s->n : s->nbatch;
    return n > 0 ? n : 1;
}

const bench_shapes *bench_sets_shapes(const bench_sets *s, int v)
{
    if (s->n == 0)
        return NULL;
    return &s->set[s->n == 1 ? 0 : v];
}

int64_t bench_sets_batch_of(const bench_sets *s, int v)
{
    if (s->nbatch == 0)
        return 0;
    return s->batch[s->nbatch == 1 ? 0 : v];
}

void bench_sets_free(bench_sets *s)
{
    for (int i = 0; i < s->n; i++)
        bench_shapes_free(&s->set[i]);
    free(s->set);
    memset(s, 0, sizeof *s);
}
