/* test_quant_calib.c — calibration statistics for int8 quantization
 * (lib/quant_calib.c): min/max, percentile and entropy ranges on known
 * distributions (uniform, normal with huge outliers, half-normal, zeros,
 * all negative), non-finite values, a frozen histogram range, the errors,
 * and that the entropy range quantizes the outlier case with a lower mean
 * squared error than min/max. Prints the time of an entropy choose(). */
#include "internal.h"
#include "unit.h"

#include <time.h>

static uint64_t rs = 0x9e3779b97f4a7c15ull;
static double urand(void) /* [0, 1) */
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (double)(rs >> 11) / 9007199254740992.0;
}
static double nrand(void)
{
    double u = urand(), v = urand();
    return sqrt(-2 * log(1 - u)) * cos(6.283185307179586 * v);
}

#define N (1 << 20)
static float buf[N];

/* Both passes over x, in chunks as a calibration loop would feed them. */
static mge_qobs *observe(const float *x, int64_t n)
{
    mge_qobs *o = mge_qobs_new();
    if (!o)
        return NULL;
    for (int64_t i = 0; i < n; i += 100000)
        mge_qobs_range(o, x + i, n - i < 100000 ? n - i : 100000);
    for (int64_t i = 0; i < n; i += 100000)
        mge_qobs_hist(o, x + i, n - i < 100000 ? n - i : 100000);
    return o;
}

/* Mean squared error of quantizing to 256 levels over [lo, hi] and back. */
static double qmse(const float *x, int64_t n, double lo, double hi)
{
    double s = (hi - lo) / 255, e = 0;
    for (int64_t i = 0; i < n; i++) {
        double q = s > 0 ? nearbyint((x[i] - lo) / s) : 0;
        q = q < 0 ? 0 : (q > 255 ? 255 : q);
        double d = lo + q * s - x[i];
        e += d * d;
    }
    return e / (double)n;
}

static void choose3(const mge_qobs *o, double P, double r[3][2])
{
    mge_error err = {0};
    for (int m = 0; m < 3; m++) {
        r[m][0] = r[m][1] = NAN;
        CHECK_OK(mge_qobs_choose(o, (mge_calib_method)m, P, &r[m][0], &r[m][1], &err), err);
        CHECK_MSG(r[m][0] <= 0 && r[m][1] >= 0, "method %d: [%g, %g] does not hold 0", m, r[m][0], r[m][1]);
    }
}

static void test_uniform(void)
{
    for (int i = 0; i < N; i++)
        buf[i] = (float)(-1 + 3 * urand()); /* U(-1, 2) */
    buf[5] = -1.0f;
    buf[6] = 2.0f;
    mge_qobs *o = observe(buf, N);
    CHECK(o);
    if (!o)
        return;
    CHECK(mge_qobs_count(o) == N);
    CHECK(mge_qobs_nonfinite(o) == 0);
    double r[3][2];
    choose3(o, 99.9, r);
    CHECK(r[0][0] == -1.0 && r[0][1] == 2.0); /* minmax exact */
    /* the 0.1% and 99.9% quantiles of U(-1, 2) */
    CHECK_NEAR(r[1][0], -1 + 0.003, 0.003);
    CHECK_NEAR(r[1][1], 2 - 0.003, 0.003);
    /* nothing to clip: entropy keeps (nearly) the whole range */
    CHECK_MSG(r[2][1] > 1.8 && r[2][1] <= 2.0, "entropy hi %g", r[2][1]);
    CHECK_MSG(r[2][0] < -0.9 && r[2][0] >= -1.0, "entropy lo %g", r[2][0]);
    printf("uniform(-1, 2): percentile 99.9 [%g, %g]; entropy [%g, %g]\n", r[1][0], r[1][1], r[2][0], r[2][1]);
    /* percentile 100 is min/max */
    mge_error err = {0};
    double lo, hi;
    CHECK_OK(mge_qobs_choose(o, MGE_CALIB_PERCENTILE, 100, &lo, &hi, &err), err);
    CHECK(lo == -1.0 && hi == 2.0);
    mge_qobs_free(o);
}

static void test_normal_outliers(void)
{
    for (int i = 0; i < N; i++)
        buf[i] = (float)nrand();
    buf[1000] = 100.0f;
    buf[2000] = -100.0f;
    mge_qobs *o = observe(buf, N);
    CHECK(o);
    if (!o)
        return;
    double r[3][2];
    choose3(o, 99.9, r);
    CHECK(r[0][0] == -100.0 && r[0][1] == 100.0);
    /* N(0,1) quantiles: 99.9% 3.0902; bins are 200/2048 = 0.098 wide */
    CHECK_NEAR(r[1][1], 3.0902, 0.05);
    CHECK_NEAR(r[1][0], -3.0902, 0.05);
    /* entropy: far below the outliers, above almost all the mass */
    CHECK_MSG(r[2][1] > 2 && r[2][1] < 10, "entropy hi %g", r[2][1]);
    CHECK_MSG(r[2][0] < -2 && r[2][0] > -10, "entropy lo %g", r[2][0]);
    double e_mm = qmse(buf, N, r[0][0], r[0][1]), e_ent = qmse(buf, N, r[2][0], r[2][1]);
    CHECK_MSG(e_ent < e_mm, "mse entropy %g >= minmax %g", e_ent, e_mm);
    printf("normal+outliers: minmax [%g, %g] mse %.3g; percentile 99.9 [%g, %g]; entropy [%g, %g] mse %.3g\n",
           r[0][0], r[0][1], e_mm, r[1][0], r[1][1], r[2][0], r[2][1], e_ent);

    /* time of one entropy choose (printed, not asserted) */
    struct timespec t0, t1;
    double lo, hi;
    mge_error err = {0};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int k = 0; k < 5; k++)
        CHECK_OK(mge_qobs_choose(o, MGE_CALIB_ENTROPY, 0, &lo, &hi, &err), err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("entropy choose: %.2f ms per tensor\n",
           ((t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) * 1e-6) / 5);
    mge_qobs_free(o);
}

static void test_half_normal(void)
{
    for (int i = 0; i < N; i++)
        buf[i] = (float)fmax(0.0, nrand()); /* ReLU of N(0,1) */
    buf[77] = 50.0f;
    mge_qobs *o = observe(buf, N);
    CHECK(o);
    if (!o)
        return;
    double r[3][2];
    choose3(o, 99.99, r);
    CHECK(r[0][0] == 0 && r[0][1] == 50.0);
    /* half the values are 0, so the 99.99th percentile of the ReLU is
     * N(0,1)'s 99.99th: 3.719; the 0.01th is 0 */
    CHECK_NEAR(r[1][1], 3.719, 0.05);
    CHECK(r[1][0] == 0);
    /* unsigned: [0, T], T clips the outlier and keeps the 99th percentile */
    CHECK(r[2][0] == 0);
    CHECK_MSG(r[2][1] > 2.33 && r[2][1] < 10, "entropy hi %g", r[2][1]);
    printf("half-normal+outlier: percentile 99.99 [%g, %g]; entropy [%g, %g]\n", r[1][0], r[1][1], r[2][0],
           r[2][1]);
    mge_qobs_free(o);
}

static void test_zero_and_negative(void)
{
    memset(buf, 0, sizeof(float) * 1000);
    mge_qobs *o = observe(buf, 1000);
    CHECK(o);
    if (!o)
        return;
    double r[3][2];
    choose3(o, 99.9, r);
    for (int m = 0; m < 3; m++)
        CHECK_MSG(r[m][0] == 0 && r[m][1] == 0, "method %d: [%g, %g]", m, r[m][0], r[m][1]);
    mge_qobs_free(o);

    for (int i = 0; i < 100000; i++)
        buf[i] = (float)(-1 - 4 * urand()); /* U(-5, -1) */
    buf[0] = -5.0f;
    buf[1] = -1.0f;
    o = observe(buf, 100000);
    CHECK(o);
    if (!o)
        return;
    double mn, mx;
    mge_qobs_minmax(o, &mn, &mx);
    CHECK(mn == -5.0 && mx == -1.0);
    choose3(o, 99, r);
    CHECK(r[0][0] == -5.0 && r[0][1] == 0);
    CHECK_NEAR(r[1][0], -5 + 0.04, 0.01);
    CHECK(r[1][1] == 0);
    CHECK_MSG(r[2][0] < -4.5 && r[2][1] == 0, "entropy [%g, %g]", r[2][0], r[2][1]);
    printf("uniform(-5, -1): percentile 99 [%g, %g]; entropy [%g, %g]\n", r[1][0], r[1][1], r[2][0], r[2][1]);
    mge_qobs_free(o);
}

static void test_nonfinite_and_frozen(void)
{
    float x[8] = {1, NAN, -2, INFINITY, 3, -INFINITY, 0.5f, 0};
    mge_qobs *o = mge_qobs_new();
    CHECK(o);
    if (!o)
        return;
    double mn = 1, mx = 1;
    mge_qobs_minmax(o, &mn, &mx);
    CHECK(mn == 0 && mx == 0);
    mge_qobs_range(o, x, 8);
    CHECK(mge_qobs_count(o) == 5);
    CHECK(mge_qobs_nonfinite(o) == 3);
    mge_qobs_minmax(o, &mn, &mx);
    CHECK(mn == -2 && mx == 3);
    mge_qobs_hist(o, x, 8);
    /* a value outside the frozen range goes to an edge bin, no crash */
    float far[2] = {1e30f, -1e30f};
    mge_qobs_hist(o, far, 2);
    double lo, hi;
    mge_error err = {0};
    CHECK_OK(mge_qobs_choose(o, MGE_CALIB_PERCENTILE, 100, &lo, &hi, &err), err);
    CHECK(lo == -2 && hi == 3);
    CHECK_OK(mge_qobs_choose(o, MGE_CALIB_PERCENTILE, 60, &lo, &hi, &err), err);
    CHECK(lo >= -2 && lo <= 0 && hi >= 0 && hi <= 3);
    CHECK_OK(mge_qobs_choose(o, MGE_CALIB_ENTROPY, 0, &lo, &hi, &err), err);
    CHECK(lo >= -2 && lo <= 0 && hi >= 0 && hi <= 3);
    mge_qobs_free(o);
}

/* Observes x[n] with the histogram pass fed `times` times, in chunks of `chunk`. */
static mge_qobs *observe_chunks(const float *x, int64_t n, int64_t chunk, int times)
{
    mge_qobs *o = mge_qobs_new();
    if (!o)
        return NULL;
    mge_qobs_range(o, x, n);
    for (int t = 0; t < times; t++)
        for (int64_t i = 0; i < n; i += chunk)
            mge_qobs_hist(o, x + i, n - i < chunk ? n - i : chunk);
    return o;
}

/* Small tensors keep their values and bin them when asked (a long graph
 * of small tensors cannot afford two histograms each): the ranges must be
 * the same bits whichever way the values arrived. Sizes around the point
 * where an observer starts binning (4 x 2048 finite values), chunked
 * finely or not; and the same values seen four times (binned at once)
 * give the same percentiles as seen once (kept), counts being 4x. */
static void test_small_tensors(void)
{
    static const int64_t sizes[] = {1, 7, 3000, 8191, 8192, 8193, 20000};
    for (int si = 0; si < (int)(sizeof sizes / sizeof *sizes); si++) {
        int64_t n = sizes[si];
        for (int64_t i = 0; i < n; i++)
            buf[i] = (float)(nrand() * (i % 97 == 0 ? 8 : 1));
        if (n > 10) {
            buf[3] = NAN;
            buf[9] = INFINITY;
        }
        mge_qobs *a = observe_chunks(buf, n, n, 1), *b = observe_chunks(buf, n, 37, 1);
        mge_qobs *c = observe_chunks(buf, n, 100, 1);
        CHECK(a && b && c);
        if (!a || !b || !c)
            return;
        double ra[3][2], rb[3][2], rc[3][2];
        choose3(a, 99.9, ra);
        choose3(b, 99.9, rb);
        choose3(c, 99.9, rc);
        for (int m = 0; m < 3; m++)
            CHECK_MSG(ra[m][0] == rb[m][0] && ra[m][1] == rb[m][1] && ra[m][0] == rc[m][0] && ra[m][1] == rc[m][1],
                      "n %lld, method %d: [%.17g, %.17g] at once, [%.17g, %.17g] in chunks of 37", (long long)n, m,
                      ra[m][0], ra[m][1], rb[m][0], rb[m][1]);
        if (n >= 3000 && n <= 8192) {
            mge_qobs *d = observe_chunks(buf, n, 1000, 4);
            double rd[3][2];
            choose3(d, 99.9, rd);
            CHECK_MSG(rd[1][0] == ra[1][0] && rd[1][1] == ra[1][1], "n %lld: percentile [%.17g, %.17g] kept, "
                      "[%.17g, %.17g] binned", (long long)n, ra[1][0], ra[1][1], rd[1][0], rd[1][1]);
            CHECK_NEAR(rd[2][1], ra[2][1], 1e-9 + (ra[2][1] - ra[2][0]) / 64);
            mge_qobs_free(d);
        }
        mge_qobs_free(a);
        mge_qobs_free(b);
        mge_qobs_free(c);
    }
}

static void test_errors(void)
{
    mge_error err = {0};
    double lo, hi;
    mge_qobs *o = mge_qobs_new();
    CHECK(o);
    if (!o)
        return;
    CHECK(mge_qobs_choose(o, MGE_CALIB_MINMAX, 0, &lo, &hi, &err) == MGE_ERR_INVALID);
    CHECK(strstr(err.msg, "no finite values"));
    float nan1 = NAN;
    mge_qobs_range(o, &nan1, 1);
    CHECK(mge_qobs_choose(o, MGE_CALIB_MINMAX, 0, &lo, &hi, &err) == MGE_ERR_INVALID);
    CHECK(strstr(err.msg, "1 non-finite"));
    float x[3] = {1, 2, 3};
    mge_qobs_range(o, x, 3);
    CHECK_OK(mge_qobs_choose(o, MGE_CALIB_MINMAX, 0, &lo, &hi, &err), err);
    CHECK(lo == 0 && hi == 3);
    CHECK(mge_qobs_choose(o, MGE_CALIB_PERCENTILE, 99, &lo, &hi, &err) == MGE_ERR_INVALID);
    CHECK(strstr(err.msg, "histogram"));
    CHECK(mge_qobs_choose(o, MGE_CALIB_ENTROPY, 0, &lo, &hi, &err) == MGE_ERR_INVALID);
    CHECK(strstr(err.msg, "histogram"));
    mge_qobs_hist(o, x, 3);
    CHECK(mge_qobs_choose(o, MGE_CALIB_PERCENTILE, 50, &lo, &hi, &err) == MGE_ERR_INVALID);
    CHECK(strstr(err.msg, "percentile 50"));
    CHECK(mge_qobs_choose(o, MGE_CALIB_PERCENTILE, 100.5, &lo, &hi, &err) == MGE_ERR_INVALID);
    CHECK(mge_qobs_choose(o, MGE_CALIB_PERCENTILE, NAN, &lo, &hi, &err) == MGE_ERR_INVALID);
    CHECK_OK(mge_qobs_choose(o, MGE_CALIB_PERCENTILE, 99, &lo, &hi, &err), err);
    CHECK(lo == 0 && hi > 2.9 && hi <= 3);
    mge_qobs_free(o);

    mge_calib_method m = MGE_CALIB_ENTROPY;
    CHECK(mge_calib_parse("minmax", &m) && m == MGE_CALIB_MINMAX);
    CHECK(mge_calib_parse("percentile", &m) && m == MGE_CALIB_PERCENTILE);
    CHECK(mge_calib_parse("entropy", &m) && m == MGE_CALIB_ENTROPY);
    CHECK(!mge_calib_parse("kl", &m) && !mge_calib_parse("", &m) && !mge_calib_parse(NULL, &m));
    CHECK(!mge_calib_needs_hist(MGE_CALIB_MINMAX));
    CHECK(mge_calib_needs_hist(MGE_CALIB_PERCENTILE) && mge_calib_needs_hist(MGE_CALIB_ENTROPY));
}

int main(void)
{
    RUN(test_uniform);
    RUN(test_normal_outliers);
    RUN(test_half_normal);
    RUN(test_zero_and_negative);
    RUN(test_nonfinite_and_frozen);
    RUN(test_small_tensors);
    RUN(test_errors);
    return unit_done();
}
