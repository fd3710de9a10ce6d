/* test_attn_bf16.c — scaled_dot_product_attention at precision=bf16 on the
 * cpu backend (kernels/cpu/cpu_attn_bf16.c under cpu_attn.c's fused
 * forward), at every bf16 level the machine has: this process runs at the
 * CPU's level (AMX where the kernel grants tile data), then re-runs itself
 * with MGE_CPU_ISA=avx512-bf16 (vdpbf16ps) and MGE_CPU_ISA=avx512 (no bf16
 * level: the f32 kernel, so bit-equal to precision=f32).
 *
 * Per shape (S = 1, 7, 64, 200, 512; d = 32, 64, 80; batch and heads;
 * plain, causal, bool and additive masks; Sq != Sk, odd d, Dv != d):
 * - against a float64 reference of bf16-rounded q, k, v: the kernel also
 *   rounds the weights P to bf16 (relative error <= 2^-9 each), which moves
 *   an output, a convex combination of v, by at most 2^-9 max|v|; the f32
 *   sums add about (d max|s| + S) 2^-24 max|v|. Tolerance: twice the first
 *   plus eight times the second.
 * - against precision=f32 (the f32 kernel): the inputs' rounding moves each
 *   score by <= 2^-8 scale sum|q||k| and an output by twice that times
 *   max|v|, plus v's and P's rounding.
 * - the bf16 path ran (differs from f32 somewhere) when a level is on; and
 *   1 vs 2 threads bit-identical.
 * - dropout in training: bf16 and f32 draw the same weights.
 * ATTN_BF16_VERBOSE=1 prints each case's errors against its tolerances. */
#include "internal.h"
#include "unit.h"
#include "unit_graph.h"

static mge_error err;

static mge_status run_cpu(const mge_graph *g, int threads, int training, const mge_tensor *const *ins, int nins,
                          mge_tensor *y)
{
    mge_exec *e = NULL;
    mge_exec_opts o = {0};
    o.threads = threads;
    o.backend = "cpu";
    o.training = training;
    mge_status s = mge_exec_create(g, &o, &e, &err);
    if (!s && training)
        mge_exec_set_seed(e, 42);
    const mge_tensor *need[8] = {0};
    for (int i = 0; !s && i < mge_exec_ninputs(e) && i < 8; i++)
        for (int k = 0; k < g->ninputs && k < nins; k++)
            if (g->inputs[k] == mge_exec_input(e, i))
                need[i] = ins[k];
    if (!s)
        s = mge_exec_run(e, need, &err);
    if (!s)
        s = mge_tensor_copy(y, mge_exec_result(e, 0), &err);
    mge_exec_free(e);
    return s;
}

typedef struct acase {
    int64_t B, H, Sq, Sk, D, Dv;
    int causal, mask;   /* mask: 0 none, 1 bool [Sq,Sk], 2 f32 [B,1,Sq,Sk] */
} acase;

static double bround(float x)
{
    return mge_bf16_to_f32(mge_f32_to_bf16(x));
}

static double maxabs(const mge_tensor *t)
{
    double m = 0;
    for (int64_t i = 0; i < mge_tensor_numel(t); i++)
        m = fmax(m, fabs(((const float *)t->data)[i]));
    return m;
}

/* float64 attention of bf16-rounded q, k, v; y [lead, Sq, Dv]. */
static void reference(const acase *c, const mge_tensor *q, const mge_tensor *k, const mge_tensor *v,
                      const mge_tensor *m, double scale, double *y, double *smax)
{
    int64_t lead = c->B * c->H;
    double *s = malloc(sizeof(double) * (size_t)c->Sk);
    *smax = 0;
    for (int64_t b = 0; b < lead; b++)
        for (int64_t i = 0; i < c->Sq; i++) {
            const float *qr = (const float *)q->data + (b * c->Sq + i) * c->D;
            double mx = -INFINITY;
            for (int64_t jk = 0; jk < c->Sk; jk++) {
                const float *kr = (const float *)k->data + (b * c->Sk + jk) * c->D;
                double acc = 0;
                for (int64_t e = 0; e < c->D; e++)
                    acc += bround(qr[e]) * bround(kr[e]);
                *smax = fmax(*smax, fabs(acc * scale));
                acc *= scale;
                if (c->mask == 1 && !((const uint8_t *)m->data)[i * c->Sk + jk])
                    acc = -INFINITY;
                if (c->mask == 2)
                    acc += ((const float *)m->data)[(b / c->H * c->Sq + i) * c->Sk + jk];
                if (c->causal && jk > i)
                    acc = -INFINITY;
                s[jk] = acc;
                mx = fmax(mx, acc);
            }
            double l = 0;
            for (int64_t jk = 0; jk < c->Sk; jk++)
                l += s[jk] = s[jk] == -INFINITY ? 0 : exp(s[jk] - mx);
            for (int64_t e = 0; e < c->Dv; e++) {
                double acc = 0;
                for (int64_t jk = 0; jk < c->Sk; jk++)
                    acc += s[jk] * bround(((const float *)v->data)[(b * c->Sk + jk) * c->Dv + e]);
                y[(b * c->Sq + i) * c->Dv + e] = acc / l;
            }
        }
    free(s);
}

static mge_graph *graph_of(const acase *c, int bf16, double dropout)
{
    char src[1024], mk[128] = "", arg[64] = "";
    if (c->mask == 1)
        snprintf(mk, sizeof mk, "input m : bool[%lld,%lld]\n", (long long)c->Sq, (long long)c->Sk);
    if (c->mask == 2)
        snprintf(mk, sizeof mk, "input m : f32[%lld,1,%lld,%lld]\n", (long long)c->B, (long long)c->Sq,
                 (long long)c->Sk);
    if (dropout > 0)
        snprintf(arg, sizeof arg, ", dropout=%g", dropout);
    snprintf(src, sizeof src,
             "input q : f32[%lld,%lld,%lld,%lld]\ninput k : f32[%lld,%lld,%lld,%lld]\n"
             "input v : f32[%lld,%lld,%lld,%lld]\n%s"
             "y = scaled_dot_product_attention(q, k, v%s%s%s, precision=%s)\noutput y\n",
             (long long)c->B, (long long)c->H, (long long)c->Sq, (long long)c->D, (long long)c->B, (long long)c->H,
             (long long)c->Sk, (long long)c->D, (long long)c->B, (long long)c->H, (long long)c->Sk, (long long)c->Dv,
             mk, c->mask ? ", m" : "", c->causal ? ", causal=true" : "", arg, bf16 ? "bf16" : "f32");
    return ug_parse(src);
}

static void alloc4(mge_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d, mge_dtype dt)
{
    CHECK_OK(mge_tensor_alloc(t, dt, 4, (int64_t[]){a, b, c, d}, &err), err);
}

static void run_case(const acase *c, mge_rng *r)
{
    int level = mge_cpu_bf16();
    mge_tensor q, k, v, m = {0};
    alloc4(&q, c->B, c->H, c->Sq, c->D, MGE_F32);
    alloc4(&k, c->B, c->H, c->Sk, c->D, MGE_F32);
    alloc4(&v, c->B, c->H, c->Sk, c->Dv, MGE_F32);
    ug_uniform(&q, r, -2, 2);
    ug_uniform(&k, r, -2, 2);
    ug_uniform(&v, r, -1, 1);
    if (c->mask == 1) {
        CHECK_OK(mge_tensor_alloc(&m, MGE_BOOL, 2, (int64_t[]){c->Sq, c->Sk}, &err), err);
        for (int64_t i = 0; i < c->Sq * c->Sk; i++)   /* key 0 always seen: no row fully masked */
            ((uint8_t *)m.data)[i] = i % c->Sk == 0 || mge_rng_uniform(r) < 0.6f;
    } else if (c->mask == 2) {
        alloc4(&m, c->B, 1, c->Sq, c->Sk, MGE_F32);
        for (int64_t i = 0; i < mge_tensor_numel(&m); i++) {
            float u = mge_rng_uniform(r);
            ((float *)m.data)[i] = i % c->Sk != 0 && u < 0.2f ? -INFINITY : 3 * u - 1.5f;
        }
    }
    const mge_tensor *ins[4] = {&q, &k, &v, &m};
    int nins = c->mask ? 4 : 3;
    mge_graph *gb = graph_of(c, 1, 0), *gf = graph_of(c, 0, 0);
    mge_tensor y1 = {0}, y2 = {0}, yf = {0};
    char what[160];
    snprintf(what, sizeof what, "[%lld,%lld,%lld,%lld] Sk=%lld Dv=%lld%s%s (%s)", (long long)c->B, (long long)c->H,
             (long long)c->Sq, (long long)c->D, (long long)c->Sk, (long long)c->Dv, c->causal ? " causal" : "",
             c->mask == 1 ? " bool mask" : c->mask == 2 ? " f32 mask" : "", mge_cpu_bf16_name(level));
    if (gb && gf) {
        CHECK_OK(run_cpu(gb, 1, 0, ins, nins, &y1), err);
        CHECK_OK(run_cpu(gb, 2, 0, ins, nins, &y2), err);
        CHECK_OK(run_cpu(gf, 2, 0, ins, nins, &yf), err);
    }
    int64_t n = mge_tensor_numel(&q) / c->D * c->Dv;
    if (y1.data && y2.data && yf.data && mge_tensor_numel(&y1) == n) {
        double scale = 1.0 / sqrt((double)c->D), smax = 0;
        double *want = malloc(sizeof(double) * (size_t)n);
        reference(c, &q, &k, &v, &m, scale, want, &smax);
        double vmax = maxabs(&v), qmax = maxabs(&q), kmax = maxabs(&k);
        double tol_ref = vmax * (2 * 0x1p-9 + 8 * 0x1p-24 * ((double)c->D * (smax + 1) + (double)c->Sk));
        double ds = 0x1p-8 * scale * (double)c->D * qmax * kmax;   /* a score's move from q's and k's rounding */
        double tol_f32 = vmax * (2 * ds + 2 * 0x1p-9) + tol_ref;
        double e_ref = 0, e_f32 = 0;
        int64_t same = 0, bad = 0;
        for (int64_t i = 0; i < n; i++) {
            float a = ((float *)y1.data)[i], b = ((float *)y2.data)[i], f = ((float *)yf.data)[i];
            bad += memcmp(&a, &b, sizeof a) != 0;
            same += memcmp(&a, &f, sizeof a) == 0;
            e_ref = fmax(e_ref, isfinite(a) ? fabs(a - want[i]) : INFINITY);
            e_f32 = fmax(e_f32, fabs((double)a - f));
        }
        CHECK_MSG(bad == 0, "%s: 1 and 2 threads differ in %lld elements", what, (long long)bad);
        if (getenv("ATTN_BF16_VERBOSE"))
            printf("%s: |y - ref| %.3g (tol %.3g), |y - f32| %.3g (tol %.3g)\n", what, e_ref, tol_ref, e_f32, tol_f32);
        CHECK_MSG(e_f32 <= tol_f32, "%s: max |y - y(f32)| = %g over %g", what, e_f32, tol_f32);
        if (level != MGE_BF16_NONE)   /* without a level the kernel is f32's: bit-equal, checked below */
            CHECK_MSG(e_ref <= tol_ref, "%s: max |y - ref(bf16 inputs)| = %g over %g", what, e_ref, tol_ref);
        if (level == MGE_BF16_NONE)
            CHECK_MSG(same == n, "%s: no bf16 level, yet %lld elements differ from f32", what, (long long)(n - same));
        else if (n >= 16)
            CHECK_MSG(same < n, "%s: bit-equal to f32: the bf16 path did not run", what);
        free(want);
    }
    mge_tensor_free(&y1);
    mge_tensor_free(&y2);
    mge_tensor_free(&yf);
    mge_graph_free(gb);
    mge_graph_free(gf);
    mge_tensor_free(&q);
    mge_tensor_free(&k);
    mge_tensor_free(&v);
    if (c->mask)
        mge_tensor_free(&m);
}

static void test_shapes(void)
{
    static const int64_t S[] = {1, 7, 64, 200, 512}, D[] = {32, 64, 80};
    mge_rng r;
    mge_rng_seed(&r, 24);
    for (int si = 0; si < 5; si++)
        for (int di = 0; di < 3; di++) {
            int64_t s = S[si], lead_b = s >= 512 ? 1 : 2;
            /* each (S, d) one mask kind, S=200 and d=64 every kind */
            for (int var = 0; var < 4; var++) {
                if (!(s == 200 && D[di] == 64) && var != (si + di) % 4)
                    continue;
                acase c = {lead_b, 2, s, s, D[di], D[di], var == 1 || var == 3, var >= 2 ? var - 1 : 0};
                run_case(&c, &r);
            }
        }
    /* Sq != Sk over several key tiles, odd d, Dv != d, large d */
    acase odd[] = {
        {1, 3, 70, 300, 33, 17, 0, 0},
        {2, 1, 130, 260, 80, 48, 1, 2},
        {1, 2, 65, 513, 64, 64, 0, 1},
        {1, 1, 40, 100, 128, 128, 1, 0},
        {3, 1, 3, 5, 256, 8, 0, 2},
    };
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++)
        run_case(&odd[i], &r);
}

/* Dropout in training: the bf16 forward draws the same weights as f32, so
 * the two stay within the bf16 tolerance (the kept weights scaled by
 * 1/(1-p)), and differ from the undropped output. */
static void test_dropout(void)
{
    acase c = {1, 2, 70, 300, 64, 64, 0, 0};
    mge_rng r;
    mge_rng_seed(&r, 5);
    mge_tensor q, k, v, yb = {0}, yf = {0}, y0 = {0};
    alloc4(&q, c.B, c.H, c.Sq, c.D, MGE_F32);
    alloc4(&k, c.B, c.H, c.Sk, c.D, MGE_F32);
    alloc4(&v, c.B, c.H, c.Sk, c.Dv, MGE_F32);
    ug_uniform(&q, &r, -2, 2);
    ug_uniform(&k, &r, -2, 2);
    ug_uniform(&v, &r, -1, 1);
    const mge_tensor *ins[3] = {&q, &k, &v};
    mge_graph *gb = graph_of(&c, 1, 0.3), *gf = graph_of(&c, 0, 0.3), *g0 = graph_of(&c, 1, 0);
    if (gb && gf && g0) {
        CHECK_OK(run_cpu(gb, 2, 1, ins, 3, &yb), err);
        CHECK_OK(run_cpu(gf, 2, 1, ins, 3, &yf), err);
        CHECK_OK(run_cpu(g0, 2, 1, ins, 3, &y0), err);
    }
    if (yb.data && yf.data && y0.data) {
        double ds = 0x1p-8 * (double)c.D / sqrt((double)c.D) * 4, tol = (2 * ds + 4 * 0x1p-9) / 0.7;
        double e = 0, d0 = 0;
        for (int64_t i = 0; i < mge_tensor_numel(&yb); i++) {
            float a = ((float *)yb.data)[i];
            e = fmax(e, fabs(a - ((float *)yf.data)[i]));
            d0 = fmax(d0, fabs(a - ((float *)y0.data)[i]));
        }
        CHECK_MSG(e <= tol, "dropout: bf16 and f32 differ by %g over %g", e, tol);
        CHECK_MSG(d0 > 1e-2, "dropout: changed nothing (%g)", d0);
    }
    mge_tensor_free(&yb);
    mge_tensor_free(&yf);
    mge_tensor_free(&y0);
    mge_graph_free(gb);
    mge_graph_free(gf);
    mge_graph_free(g0);
    mge_tensor_free(&q);
    mge_tensor_free(&k);
    mge_tensor_free(&v);
}


int main(int argc, char **argv)
{
    (void)argc;
    printf("test_attn_bf16: bf16 level %s%s%s\n", mge_cpu_bf16_name(mge_cpu_bf16()),
           *mge_cpu_bf16_note() ? ": " : "", mge_cpu_bf16_note());
    RUN(test_shapes);
    RUN(test_dropout);
    int rc = unit_done();
    if (!getenv("MGE_CPU_ISA")) {
        if (mge_cpu_bf16() == MGE_BF16_AMX)
            rc |= unit_rerun_isa(argv, "test_attn_bf16", "avx512-bf16");
        rc |= unit_rerun_isa(argv, "test_attn_bf16", "avx512");
    }
    return rc;
}
