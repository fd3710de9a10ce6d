/* test_act_approx.c — the float erf and tanh of kernels/cpu/cpu_act.h
 * (cpu_erff, cpu_tanhf) against libm's double erf and tanh: a dense sweep
 * of [-10, 10], every power of two down to the denormals, and the edge
 * values (+-0, +-inf, NaN, FLT_MAX); both the scalar functions and the
 * vector loops they are inlined into (the AVX2+FMA copy where the machine
 * has it): a plain loop of each, and the table's loops of cpu_act_apply
 * for tanh and gelu (erf is no fused activation). */
#include "unit.h"

#include "cpu/cpu_act.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

#define ERF_ABS 2e-7     /* the bound, absolute */
#define TANH_ULP 4.0     /* a few ulp of the float result */
#define GELU_REL 1e-6    /* of max(|x|, 1): 0.5 |x| times erf's error */

/* The ulp of a float near y (the spacing above |y|; the denormal step
 * below FLT_MIN). */
static double ulp_of(double y)
{
    float a = fabsf((float)y);
    return a < FLT_MIN ? ldexp(1.0, -149) : (double)nextafterf(a, INFINITY) - (double)a;
}

/* The points: [-10, 10] at a step of 2^-12, and +-2^e for e in [-149, 3]. */
static float *sweep(int64_t *np)
{
    int64_t n = 2 * 10 * 4096 + 1 + 2 * 153, k = 0;
    float *x = malloc(sizeof(float) * (size_t)n);
    if (!x)
        return NULL;
    for (int64_t i = -10 * 4096; i <= 10 * 4096; i++)
        x[k++] = (float)ldexp((double)i, -12);
    for (int e = -149; e <= 3; e++) {
        x[k++] = (float)ldexp(1.0, e);
        x[k++] = (float)-ldexp(1.0, e);
    }
    *np = k;
    return x;
}

static void check_erf(const float *x, const float *y, int64_t n, const char *what)
{
    double worst = 0, wx = 0, wrel = 0;
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double ref = erf((double)x[i]), e = fabs((double)y[i] - ref);
        /* near 0 erf is 1.13 x: 2e-7 absolute is no bound there, so also
         * a few ulp of the result */
        double rel = fabs(x[i]) < 1 && ref != 0 ? e / ulp_of(ref) : 0;
        if (e > worst)
            worst = e, wx = x[i];
        if (rel > wrel)
            wrel = rel;
        if (e > ERF_ABS || rel > TANH_ULP || (x[i] != 0 && (y[i] > 0) != (x[i] > 0)))
            bad++;
    }
    printf("  %s: max |erf - libm| = %.3g at x = %.9g, max %.2f ulp below |x| = 1\n", what, worst, wx, wrel);
    CHECK_MSG(bad == 0, "%s: %lld points beyond %g absolute / %.0f ulp", what, (long long)bad, ERF_ABS, TANH_ULP);
}

static void check_tanh(const float *x, const float *y, int64_t n, const char *what)
{
    double worst = 0, wx = 0;
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double ref = tanh((double)x[i]), u = fabs((double)y[i] - ref) / ulp_of(ref);
        if (u > worst)
            worst = u, wx = x[i];
        if (u > TANH_ULP || fabsf(y[i]) > 1.0f || (x[i] != 0 && (y[i] > 0) != (x[i] > 0)))
            bad++;
    }
    printf("  %s: max |tanh - libm| = %.2f ulp at x = %.9g\n", what, worst, wx);
    CHECK_MSG(bad == 0, "%s: %lld points beyond %.0f ulp or |tanh| > 1 or the wrong sign", what, (long long)bad,
              TANH_ULP);
}

static void test_scalar(void)
{
    int64_t n = 0;
    float *x = sweep(&n);
    float *y = x ? calloc((size_t)n, sizeof(float)) : NULL;
    CHECK(x && y);
    if (!x || !y) {
        free(x), free(y);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        y[i] = cpu_erff(x[i]);
    check_erf(x, y, n, "cpu_erff");
    for (int64_t i = 0; i < n; i++)
        CHECK_MSG(cpu_erff(-x[i]) == -y[i], "erf is odd: x = %.9g", x[i]);
    for (int64_t i = 0; i < n; i++)
        y[i] = cpu_tanhf(x[i]);
    check_tanh(x, y, n, "cpu_tanhf");
    for (int64_t i = 0; i < n; i++)
        CHECK_MSG(cpu_tanhf(-x[i]) == -y[i], "tanh is odd: x = %.9g", x[i]);
    /* monotone (non-decreasing) over the sorted sweep */
    int64_t dec_e = 0, dec_t = 0;
    for (int64_t i = 1; i <= 20 * 4096; i++) {
        dec_e += cpu_erff(x[i]) < cpu_erff(x[i - 1]);
        dec_t += cpu_tanhf(x[i]) < cpu_tanhf(x[i - 1]);
    }
    CHECK_MSG(dec_e == 0 && dec_t == 0, "not monotone: erf %lld, tanh %lld steps down", (long long)dec_e,
              (long long)dec_t);
    free(x), free(y);
}

static void test_edges(void)
{
    float v[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, FLT_MAX, -FLT_MAX, 3.92f, 4.0f, 4.5f, 9.1f, 10.0f,
                 100.0f, -100.0f, 0.625f, -0.625f, 1.0f, -1.0f, 1e-30f, -1e-45f};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        float e = cpu_erff(v[i]), t = cpu_tanhf(v[i]);
        if (isnan(v[i])) {
            CHECK_MSG(isnan(e) && isnan(t), "NaN in: erf %g tanh %g", e, t);
            continue;
        }
        double re = erf((double)v[i]), rt = tanh((double)v[i]);
        CHECK_MSG(fabs(e - re) <= ERF_ABS, "erf(%g) = %.9g, libm %.9g", v[i], e, re);
        CHECK_MSG(fabs(t - rt) <= TANH_ULP * ulp_of(rt), "tanh(%g) = %.9g, libm %.9g", v[i], t, rt);
        CHECK_MSG(signbit(e) == signbit(v[i]) && signbit(t) == signbit(v[i]), "sign of erf/tanh(%g)", v[i]);
        if (fabsf(v[i]) >= 10.0f)   /* saturated exactly */
            CHECK_MSG(fabsf(e) == 1.0f && fabsf(t) == 1.0f, "erf(%g) = %.9g, tanh %.9g", v[i], e, t);
    }
}

/* y = erf(x), y = tanh(x), compiled as the kernels' loops are */
CPU_MULTI(erf_loop, (const float *x, float *y, int64_t n), (x, y, n), {
    for (int64_t i = 0; i < n; i++)
        y[i] = cpu_erff(x[i]);
})
CPU_MULTI(tanh_loop, (const float *x, float *y, int64_t n), (x, y, n), {
    for (int64_t i = 0; i < n; i++)
        y[i] = cpu_tanhf(x[i]);
})

/* The loops of the table (what the unary kernels, the RNN gates and the
 * fused epilogues run). */
static void test_vector(void)
{
    int64_t n = 0;
    float *x = sweep(&n);
    float *y = x ? calloc((size_t)n, sizeof(float)) : NULL;
    CHECK(x && y);
    if (!x || !y) {
        free(x), free(y);
        return;
    }
    printf("  vector loops: %s\n", cpu_isa_avx2() ? "avx2+fma" : "baseline");
    erf_loop(x, y, n);
    check_erf(x, y, n, "erf loop");
    tanh_loop(x, y, n);
    check_tanh(x, y, n, "tanh loop");
    memcpy(y, x, sizeof(float) * (size_t)n);
    cpu_act_apply(MGE_OP_TANH, 0, y, NULL, n);
    check_tanh(x, y, n, "tanh table loop");
    memcpy(y, x, sizeof(float) * (size_t)n);
    cpu_act_apply(MGE_OP_GELU, 0, y, NULL, n);
    double worst = 0;
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double ref = 0.5 * x[i] * (1.0 + erf((double)x[i] * 0.70710678118654752));
        double e = fabs(y[i] - ref) / fmax(fabs((double)x[i]), 1.0);
        worst = e > worst ? e : worst;
        bad += e > GELU_REL;
    }
    printf("  gelu loop: max |gelu - libm| / max(|x|, 1) = %.3g\n", worst);
    CHECK_MSG(bad == 0, "gelu loop: %lld points beyond %g", (long long)bad, GELU_REL);
    free(x), free(y);
}

int main(void)
{
    RUN(test_scalar);
    RUN(test_edges);
    RUN(test_vector);
    return unit_done();
}
