/* sched.c — learning-rate schedules (declared in lib/mge.h), PyTorch's closed
 * forms with 1-based steps (step 1 is PyTorch's epoch 0):
 *   step:EVERY[:GAMMA]  base * GAMMA^floor((step-1)/EVERY)          (StepLR)
 *   cosine[:MIN_LR]     min + (base-min) * (1 + cos(pi*t/T)) / 2,
 *                       t = step-1 clamped to T = total       (CosineAnnealingLR)
 * and a linear warm-up on top: times step/warmup while step < warmup.
 * PyTorch's cosine keeps going past T (back up towards base); training
 * never runs past total, and clamping keeps a longer run at MIN_LR. */
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char forms[] = "constant, step:EVERY[:GAMMA] or cosine[:MIN_LR]";

/* A whole number of [p, end) into *v; 0 when it is not one. */
static int parse_int(const char *p, const char *end, int64_t *v)
{
    char buf[32], *e;
    size_t n = (size_t)(end - p);
    if (n == 0 || n >= sizeof buf || *p == '-' || *p == '+' || *p == ' ')
        return 0;
    memcpy(buf, p, n);
    buf[n] = 0;
    errno = 0;
    long long x = strtoll(buf, &e, 10);
    if (*e || errno)
        return 0;
    *v = x;
    return 1;
}

static int parse_num(const char *p, const char *end, double *v)
{
    char buf[64], *e;
    size_t n = (size_t)(end - p);
    if (n == 0 || n >= sizeof buf || *p == ' ')
        return 0;
    memcpy(buf, p, n);
    buf[n] = 0;
    double x = strtod(buf, &e);
    if (*e || !isfinite(x))
        return 0;
    *v = x;
    return 1;
}

static mge_status bad(const char *spec, const char *why, mge_error *err)
{
    return mge_error_set(err, MGE_ERR_INVALID, "learning-rate schedule '%s': %s; expected %s", spec, why, forms);
}

mge_status mge_sched_parse(const char *spec, double base_lr, int64_t warmup, int64_t total, mge_sched *s,
                           mge_error *err)
{
    if (!s)
        return mge_error_set(err, MGE_ERR_INVALID, "learning-rate schedule: no result");
    memset(s, 0, sizeof *s);
    if (!spec)
        spec = "constant";
    if (!(isfinite(base_lr) && base_lr >= 0))
        return mge_error_set(err, MGE_ERR_INVALID, "learning rate %g: expected a finite number >= 0", base_lr);
    if (warmup < 0)
        return mge_error_set(err, MGE_ERR_INVALID, "warm-up of %lld steps: expected >= 0", (long long)warmup);
    if (total < 0)
        return mge_error_set(err, MGE_ERR_INVALID, "total of %lld steps: expected >= 0", (long long)total);
    s->base_lr = base_lr;
    s->warmup = warmup;
    s->total = total;
    s->gamma = 1;
    const char *end = spec + strlen(spec), *c1 = strchr(spec, ':');
    const char *kend = c1 ? c1 : end;
    size_t klen = (size_t)(kend - spec);
    if (klen == 8 && memcmp(spec, "constant", 8) == 0) {
        if (c1)
            return bad(spec, "constant takes no arguments", err);
        s->kind = MGE_SCHED_CONSTANT;
        return MGE_OK;
    }
    if (klen == 4 && memcmp(spec, "step", 4) == 0) {
        if (!c1)
            return bad(spec, "step needs EVERY (steps between decays)", err);
        const char *c2 = strchr(c1 + 1, ':');
        if (!parse_int(c1 + 1, c2 ? c2 : end, &s->step_size) || s->step_size < 1)
            return bad(spec, "EVERY must be a whole number >= 1", err);
        s->gamma = 0.1;
        if (c2 && (!parse_num(c2 + 1, end, &s->gamma) || !(s->gamma > 0)))
            return bad(spec, "GAMMA must be a finite number > 0", err);
        s->kind = MGE_SCHED_STEP;
        return MGE_OK;
    }
    if (klen == 6 && memcmp(spec, "cosine", 6) == 0) {
        if (c1 && (strchr(c1 + 1, ':') || !parse_num(c1 + 1, end, &s->min_lr) || s->min_lr < 0))
            return bad(spec, "MIN_LR must be a finite number >= 0", err);
        if (total < 1)
            return mge_error_set(err, MGE_ERR_INVALID,
                                 "learning-rate schedule '%s' needs the total number of training steps (got %lld)",
                                 spec, (long long)total);
        s->kind = MGE_SCHED_COSINE;
        return MGE_OK;
    }
    return bad(spec, "unknown schedule", err);
}

double mge_sched_lr(const mge_sched *s, int64_t step)
{
    if (step < 1)
        step = 1;
    double lr = s->base_lr;
    int64_t t = step - 1;
    if (s->kind == MGE_SCHED_STEP && s->step_size > 0)
        lr = s->base_lr * pow(s->gamma, (double)(t / s->step_size));
    else if (s->kind == MGE_SCHED_COSINE && s->total > 0) {
        double tt = (double)(t < s->total ? t : s->total);
        lr = s->min_lr + (s->base_lr - s->min_lr) * (1 + cos(M_PI * tt / (double)s->total)) / 2;
    }
    if (s->warmup > 0 && step < s->warmup)
        lr = lr * (double)step / (double)s->warmup;
    return lr;
}
