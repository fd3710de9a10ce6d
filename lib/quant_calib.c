/* quant_calib.c — calibration statistics for post-training int8
 * quantization: per tensor, the min/max of what it held over the
 * calibration data, histograms of those values, and the range [lo, hi] to
 * quantize to by min/max, percentile or entropy (KL divergence, as in
 * TensorRT's calibrator). */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NB MGE_QOBS_BINS

/* The histograms take 32 KiB per tensor, which a long graph of small
 * tensors cannot afford for every value: until a tensor has had more
 * values than that many bytes hold, its finite values are kept as they
 * are and binned when asked for. Bins are counts under a binning frozen
 * before the first value, so binning late gives the same counts. */
#define RAW_MAX (4 * NB)

typedef struct hist {
    int64_t h[NB], ha[NB];
} hist;

struct mge_qobs {
    double mn, mx;        /* pass 1, finite values only */
    int64_t count, nonfinite;
    int hist_on;          /* the binning below is frozen */
    int nomem;            /* a value could not be kept: choose() fails */
    double hmn, hmx, habs; /* signed bins over [hmn, hmx], |x| bins over [0, habs] */
    int64_t hn;           /* values binned or kept in raw */
    hist *bins;           /* NULL while the values fit in raw */
    float *raw;           /* finite values not binned yet */
    int64_t nraw, capraw;
};

mge_qobs *mge_qobs_new(void)
{
    return calloc(1, sizeof(mge_qobs));
}

void mge_qobs_free(mge_qobs *o)
{
    if (!o)
        return;
    free(o->bins);
    free(o->raw);
    free(o);
}

void mge_qobs_range(mge_qobs *o, const float *x, int64_t n)
{
    /* Branch-free so the compiler can vectorize it: a non-finite value
     * (|v| > FLT_MAX or NaN, for which both compares are false) is
     * counted and replaced by a value that changes neither min nor max. */
    /* Four independent accumulators break the compare-select chain. */
    float mn4[4] = {INFINITY, INFINITY, INFINITY, INFINITY};
    float mx4[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
    int64_t bad = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int k = 0; k < 4; k++) {
            float v = x[i + k];
            int ok = fabsf(v) <= 3.40282347e38f;
            bad += !ok;
            float lo = ok ? v : INFINITY, hi = ok ? v : -INFINITY;
            mn4[k] = lo < mn4[k] ? lo : mn4[k];
            mx4[k] = hi > mx4[k] ? hi : mx4[k];
        }
    for (; i < n; i++) {
        float v = x[i];
        int ok = fabsf(v) <= 3.40282347e38f;
        bad += !ok;
        float lo = ok ? v : INFINITY, hi = ok ? v : -INFINITY;
        mn4[0] = lo < mn4[0] ? lo : mn4[0];
        mx4[0] = hi > mx4[0] ? hi : mx4[0];
    }
    float mn = fminf(fminf(mn4[0], mn4[1]), fminf(mn4[2], mn4[3]));
    float mx = fmaxf(fmaxf(mx4[0], mx4[1]), fmaxf(mx4[2], mx4[3]));
    int64_t good = n - bad;
    if (good > 0) {
        if (o->count == 0) {
            o->mn = mn;
            o->mx = mx;
        } else {
            o->mn = mn < o->mn ? mn : o->mn;
            o->mx = mx > o->mx ? mx : o->mx;
        }
    }
    o->count += good;
    o->nonfinite += bad;
}

/* Bins the finite values of x[n] into b under o's frozen binning; returns how many. */
static int64_t bin_values(const mge_qobs *o, hist *b, const float *x, int64_t n)
{
    const double mn = o->hmn;
    const double s = o->hmx > o->hmn ? NB / (o->hmx - o->hmn) : 0.0;
    const double sa = o->habs > 0 ? NB / o->habs : 0.0;
    const double top = NB - 1;
    int64_t *restrict h = b->h, *restrict ha = b->ha;
    int64_t binned = 0;
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        if (!isfinite(v))
            continue;
        /* Clamped in double before the cast: out-of-range values (a range
         * frozen before later data) land in the edge bins, never UB. */
        double d = ((double)v - mn) * s;
        d = d < 0 ? 0 : (d > top ? top : d);
        double a = fabs((double)v) * sa;
        a = a > top ? top : a;
        h[(int)d]++;
        ha[(int)a]++;
        binned++;
    }
    return binned;
}

/* Keeps the finite values of x[n] in o->raw; 0 when they do not fit under RAW_MAX (or no memory). */
static int keep_raw(mge_qobs *o, const float *x, int64_t n)
{
    int64_t fin = 0;
    for (int64_t i = 0; i < n; i++)
        fin += isfinite(x[i]) != 0;
    if (o->nraw + fin > RAW_MAX)
        return 0;
    if (o->nraw + fin > o->capraw) {
        int64_t cap = o->capraw ? o->capraw : 64;
        while (cap < o->nraw + fin)
            cap *= 2;
        float *r = realloc(o->raw, sizeof(float) * (size_t)cap);
        if (!r)
            return 0;
        o->raw = r;
        o->capraw = cap;
    }
    for (int64_t i = 0; i < n; i++)
        if (isfinite(x[i]))
            o->raw[o->nraw++] = x[i];
    o->hn += fin;
    return 1;
}

void mge_qobs_hist(mge_qobs *o, const float *x, int64_t n)
{
    if (o->count == 0 || o->nomem)
        return; /* no range to bin over; choose() reports it */
    if (!o->hist_on) {
        o->hist_on = 1;
        o->hmn = o->mn;
        o->hmx = o->mx;
        o->habs = fmax(fabs(o->mn), fabs(o->mx));
    }
    if (!o->bins && keep_raw(o, x, n))
        return;
    if (!o->bins) {
        if (!(o->bins = calloc(1, sizeof *o->bins))) {
            o->nomem = 1;
            return;
        }
        bin_values(o, o->bins, o->raw, o->nraw); /* already counted in hn */
        free(o->raw);
        o->raw = NULL;
        o->nraw = o->capraw = 0;
    }
    o->hn += bin_values(o, o->bins, x, n);
}

int64_t mge_qobs_nonfinite(const mge_qobs *o)
{
    return o->nonfinite;
}

int64_t mge_qobs_count(const mge_qobs *o)
{
    return o->count;
}

void mge_qobs_minmax(const mge_qobs *o, double *mn, double *mx)
{
    *mn = o->count ? o->mn : 0;
    *mx = o->count ? o->mx : 0;
}

int mge_calib_needs_hist(mge_calib_method m)
{
    return m == MGE_CALIB_PERCENTILE || m == MGE_CALIB_ENTROPY;
}

int mge_calib_parse(const char *s, mge_calib_method *m)
{
    static const char *const names[] = {"minmax", "percentile", "entropy"};
    for (int i = 0; i < 3; i++)
        if (s && strcmp(s, names[i]) == 0) {
            *m = (mge_calib_method)i;
            return 1;
        }
    return 0;
}

/* The value below which a fraction q of the binned values lie, linear
 * inside the bin that crosses it. */
static double hist_quantile(const mge_qobs *o, const hist *hb, double q)
{
    const double w = (o->hmx - o->hmn) / NB;
    const double target = q * (double)o->hn;
    double cum = 0;
    for (int b = 0; b < NB; b++) {
        if (hb->h[b] == 0)
            continue;
        double c = (double)hb->h[b];
        if (cum + c >= target) {
            double f = (target - cum) / c;
            f = f < 0 ? 0 : (f > 1 ? 1 : f);
            double v = o->hmn + (b + f) * w;
            return v < o->hmn ? o->hmn : (v > o->hmx ? o->hmx : v);
        }
        cum += c;
    }
    return o->hmx;
}

static double xlogx(double v)
{
    return v > 0 ? v * log(v) : 0;
}

/* TensorRT's search over the |x| histogram: the number of bins i to keep
 * (threshold i * width) minimizing KL(P || Q). Q is piecewise constant over
 * `levels` chunks of bins, so with prefix sums each candidate costs
 * O(levels) instead of O(i): sum p log q is one log per chunk.
 * One change from TensorRT: Q is normalized by all N values, not by the
 * C[i] it holds, so the clipped fraction f adds -log(1 - f) to the
 * divergence. Without it, data far from 0 (all in [-5, -1], say) "wins"
 * by clipping everything into the last bin: P and Q are then the same
 * spike. For data centred on 0 the term is negligible. */
/* skip0: leave bin 0 out of the divergence (unsigned data). After a ReLU
 * about half the values are exact zeros, which the zero point represents
 * exactly; averaged into the first chunk, that spike made small
 * thresholds look best (resnet18's post-ReLU scales came out 2-4x too
 * small, SQNR 8 dB instead of 30). */
static int entropy_bins(const int64_t *ha, int levels, int skip0)
{
    static const double eps = 1e-4; /* Q where P has mass and Q none (smoothing) */
    /* Prefix arrays: counts, non-empty bins, sum a log a. */
    double *C = malloc(sizeof(double) * 3 * (NB + 1));
    if (!C)
        return NB; /* no scratch: fall back to no clipping */
    double *Z = C + (NB + 1), *L = Z + (NB + 1);
    C[0] = Z[0] = L[0] = 0;
    for (int j = 0; j < NB; j++) {
        double a = (double)ha[j];
        C[j + 1] = C[j] + a;
        Z[j + 1] = Z[j] + (a > 0);
        L[j + 1] = L[j] + xlogx(a);
    }
    const double N = C[NB];
    int best = NB;
    double best_kl = INFINITY;
    for (int i = 128; i <= NB; i++) {
        /* fewer bins than levels: one level per bin, only clipping counts */
        const int lv = i < levels ? i : levels;
        const double Ci = C[i];
        if (Ci <= 0)
            continue;
        const double out = N - Ci;               /* folded into bin i-1 of P */
        const double plast = (double)ha[i - 1] + out;
        const int b0 = skip0 ? 1 : 0;            /* first bin compared */
        /* sum over P's bins of p log p, unnormalized */
        double splogp = L[i - 1] - L[b0] + xlogx(plast);
        double splogq = 0;
        for (int c = 0; c < lv; c++) {
            int s = b0 + (int)((int64_t)c * (i - b0) / lv), e = b0 + (int)((int64_t)(c + 1) * (i - b0) / lv);
            if (e <= s)
                continue;
            double S = C[e] - C[s];              /* Q's mass in the chunk (unclipped) */
            double nz = Z[e] - Z[s];
            double pm = S;                       /* P's mass in the chunk */
            if (e == i) {
                pm += out;
                if (ha[i - 1] == 0 && out > 0)
                    nz += 1;
            }
            if (pm <= 0)
                continue;
            /* q for each non-empty bin: S / nz / N, or eps */
            double q = S > 0 ? S / nz / N : eps;
            splogq += pm * log(q);
        }
        /* KL = sum (p/N) log((p/N) / q) over the compared bins */
        double kl = (splogp - splogq) / N - log(N) * (N - C[b0]) / N;
        if (kl < best_kl) {
            best_kl = kl;
            best = i;
        }
    }
    free(C);
    return best;
}

/* o's histograms: its own, or *tmp binned from the values it kept (the caller frees *tmp). */
static const hist *bins_of(const mge_qobs *o, hist **tmp)
{
    *tmp = NULL;
    if (o->bins)
        return o->bins;
    if (!(*tmp = calloc(1, sizeof **tmp)))
        return NULL;
    bin_values(o, *tmp, o->raw, o->nraw);
    return *tmp;
}

mge_status mge_qobs_choose(const mge_qobs *o, mge_calib_method m, double percentile, double *lo, double *hi,
                           mge_error *err)
{
    hist *tmp = NULL;
    const hist *hb;
    if (o->count == 0)
        return mge_error_set(err, MGE_ERR_INVALID, "calibration: no finite values observed (%lld non-finite)",
                             (long long)o->nonfinite);
    double l, h;
    switch (m) {
    case MGE_CALIB_MINMAX:
        l = o->mn;
        h = o->mx;
        break;
    case MGE_CALIB_PERCENTILE:
        if (!(percentile > 50 && percentile <= 100))
            return mge_error_set(err, MGE_ERR_INVALID, "calibration: percentile %g is not in (50, 100]",
                                 percentile);
        if (!o->hist_on || o->hn == 0)
            return mge_error_set(err, MGE_ERR_INVALID,
                                 "calibration: percentile needs the histogram pass (mge_qobs_hist)");
        if (percentile == 100) {
            l = o->hmn;
            h = o->hmx;
        } else {
            if (o->nomem || !(hb = bins_of(o, &tmp)))
                return mge_error_set(err, MGE_ERR_NOMEM, "calibration: out of memory");
            l = hist_quantile(o, hb, (100 - percentile) / 100);
            h = hist_quantile(o, hb, percentile / 100);
            free(tmp);
        }
        break;
    case MGE_CALIB_ENTROPY: {
        if (!o->hist_on || o->hn == 0)
            return mge_error_set(err, MGE_ERR_INVALID,
                                 "calibration: entropy needs the histogram pass (mge_qobs_hist)");
        if (o->habs <= 0) {
            l = h = 0;
            break;
        }
        if (o->nomem || !(hb = bins_of(o, &tmp)))
            return mge_error_set(err, MGE_ERR_NOMEM, "calibration: out of memory");
        int unsig = o->hmn >= 0;
        int i = entropy_bins(hb->ha, unsig ? 255 : 127, unsig);
        free(tmp);
        double t = i == NB ? o->habs : o->habs * i / NB;
        if (unsig) {
            l = 0;
            h = t < o->hmx ? t : o->hmx;
        } else {
            l = o->hmn > -t ? o->hmn : -t;
            h = o->hmx < t ? o->hmx : t;
        }
        break;
    }
    default:
        return mge_error_set(err, MGE_ERR_INVALID, "calibration: unknown method %d", (int)m);
    }
    *lo = l < 0 ? l : 0;
    *hi = h > 0 ? h : 0;
    return MGE_OK;
}
