/* cpu_fused_elem.c — fused_elemwise (f32) in one pass over memory.
 *
 * The output is cut into tiles of FE_TILE elements (fixed boundaries, so
 * the result does not depend on the thread count; tiles are split over the
 * pool). Per tile, every op of the chain runs over the tile with a
 * vectorized loop (compiled for AVX2+FMA and baseline, cpu.h) while the
 * tile stays in L1: the first op reads x's elements straight from x (or
 * from x gathered into the tile when x is broadcast), each binary op reads
 * its extra input's elements for the tile straight from that tensor, and
 * the results go to y's tile itself. Each input is read once and y
 * written once.
 *
 * Broadcasting: the output dims are collapsed first (size-1 dims dropped,
 * neighbours merged where every input strides through them alike), then
 * each input is one of: the output's shape (a contiguous range), a scalar,
 * a per-channel operand (one value over runs of `inner` elements: [C,1,1]
 * against [N,C,H,W]), a per-row one (a vector repeating every `mid`
 * elements: [W]), or general (index arithmetic along the collapsed dims,
 * one run of the last dim at a time, into a scratch tile).
 *
 * In place: y may be x's buffer. Each loop reads element i before it
 * writes element i, and other tiles are other bytes, so that is safe. When
 * an extra input shares y's bytes (x * x in place), the chain runs in a
 * local buffer instead, stored to y once the tile is done, so the extra
 * input is read before its tile changes.
 * Every intermediate is rounded to f32, as the unfused cpu kernels do, so
 * the fused node gives the same numbers as the chain it replaces. */
#include "cpu_act.h"

#include <math.h>
#include <string.h>

#define FE_TILE 1024    /* floats per tile: 4 KiB of y (or a buffer) + 4 KiB scratch per thread */
#define FE_MINRUN 16    /* shorter constant or vector runs are gathered instead */
#define FE_MAXIN 9      /* x and up to 8 extra inputs (ops.def) */

/* ---------------------------------------------------------------- loops over a tile */

/* The table ops (kernels/kact.h, the same expressions as the unfused
 * kernels); alpha is the node's. */
/* Two forms, as cpu_elemwise.c's unary loop (the same bits as the unfused
 * op whatever the split, alignment or t == x): cpu_act.h's blocks of 16 on
 * AVX-512, the plain loop on AVX2 and baseline. */
#define FE_UN_BODY                                          \
    {                                                       \
        kact_par p = kact_par_default(op, alpha);           \
        KACT_CPU_BEGIN(&p);                                 \
        switch (op) {                                       \
            KACT_CPU_CASES                                  \
        default:                                            \
            if (t != x)                                     \
                memcpy(t, x, sizeof(float) * (size_t)n);    \
            break;                                          \
        }                                                   \
    }
#define FE_UN_PARAMS (int op, float alpha, const float *x, float *t, int64_t n)
#if CPU_SPLIT_AVX512
#define KACT_LOOP(EXPR) CPU_ACT_BLOCKS(x, t, EXPR)
static CPU_AVX512 void fe_unary_avx512 FE_UN_PARAMS FE_UN_BODY
#undef KACT_LOOP
#endif
#define KACT_LOOP(EXPR)                   \
    for (int64_t i = 0; i < n; i++) {     \
        float v = x[i];                   \
        t[i] = (EXPR);                    \
    }
CPU_MULTI(fe_unary_v, FE_UN_PARAMS, (op, alpha, x, t, n), FE_UN_BODY)
#undef KACT_LOOP
CPU_SPLIT3(fe_unary, FE_UN_PARAMS, (op, alpha, x, t, n))

/* t = a op b[i] (b != NULL) or t = a op s; t may be a. */
#define FE_BIN(OPID, EXPR)                            \
    case OPID:                                        \
        if (b)                                        \
            for (int64_t i = 0; i < n; i++) {         \
                float u = a[i], v = b[i];             \
                t[i] = (EXPR);                        \
            }                                         \
        else                                          \
            for (int64_t i = 0; i < n; i++) {         \
                float u = a[i], v = s;                \
                t[i] = (EXPR);                        \
            }                                         \
        break;

CPU_MULTI3(fe_binary, (int op, const float *a, const float *b, float s, float *t, int64_t n), (op, a, b, s, t, n), {
    switch (op) {
        FE_BIN(MGE_OP_ADD, u + v)
        FE_BIN(MGE_OP_SUB, u - v)
        FE_BIN(MGE_OP_MUL, u * v)
        FE_BIN(MGE_OP_DIV, u / v)
        FE_BIN(MGE_OP_MAXIMUM, u > v || u != u ? u : v)   /* NaN propagates */
        FE_BIN(MGE_OP_MINIMUM, u < v || u != u ? u : v)
        FE_BIN(MGE_OP_POW, powf(u, v))
    default:
        break;
    }
})

/* ---------------------------------------------------------------- inputs */

enum { SRC_FULL, SRC_SCALAR, SRC_CHAN, SRC_ROW, SRC_GEN };

typedef struct fe_src {
    int kind;
    const float *p;
    int64_t mid, inner;          /* CHAN: p[(o / inner) % mid]; ROW: p[o % mid] (inner 1) */
    int64_t st[MGE_MAX_DIMS];    /* GEN: strides along the collapsed output dims (0: broadcast) */
} fe_src;

typedef struct fe_job {
    int nops, ops[MGE_MAX_DIMS];
    float alpha;
    int nin;
    fe_src src[FE_MAXIN];
    int nd;
    int64_t dims[MGE_MAX_DIMS];  /* the collapsed output */
    int64_t n;
    float *y;
    int direct;                  /* the chain may run in y's memory (no extra input shares it) */
} fe_job;

static void fe_fill(float *d, float v, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        d[i] = v;
}

/* Output elements [o0, o0 + len) of a general input into d: runs along the
 * last collapsed dim, the offset recomputed from the multi-index per run. */
static void fe_gather(const fe_job *j, const fe_src *s, int64_t o0, int64_t len, float *d)
{
    int nd = j->nd;
    int64_t idx[MGE_MAX_DIMS], r = o0;
    for (int k = nd - 1; k >= 0; k--) {
        idx[k] = r % j->dims[k];
        r /= j->dims[k];
    }
    int64_t last = j->dims[nd - 1], sl = s->st[nd - 1];
    for (int64_t done = 0; done < len;) {
        int64_t off = 0;
        for (int k = 0; k < nd; k++)
            off += idx[k] * s->st[k];
        int64_t run = last - idx[nd - 1];
        if (run > len - done)
            run = len - done;
        if (sl == 0)
            fe_fill(d + done, s->p[off], run);
        else if (sl == 1)
            memcpy(d + done, s->p + off, sizeof(float) * (size_t)run);
        else
            for (int64_t i = 0; i < run; i++)
                d[done + i] = s->p[off + i * sl];
        done += run;
        idx[nd - 1] += run;
        for (int k = nd - 1; k > 0 && idx[k] == j->dims[k]; k--) {
            idx[k] = 0;
            idx[k - 1]++;
        }
    }
}

/* Input s's elements for output [o0, o0 + len) into d. */
static void fe_load(const fe_job *j, const fe_src *s, int64_t o0, int64_t len, float *d)
{
    switch (s->kind) {
    case SRC_FULL: memcpy(d, s->p + o0, sizeof(float) * (size_t)len); break;
    case SRC_SCALAR: fe_fill(d, s->p[0], len); break;
    case SRC_CHAN:
        for (int64_t o = o0, e = o0 + len; o < e;) {
            int64_t q = o / s->inner, end = (q + 1) * s->inner;
            if (end > e)
                end = e;
            fe_fill(d + (o - o0), s->p[q % s->mid], end - o);
            o = end;
        }
        break;
    case SRC_ROW:
        for (int64_t o = o0, e = o0 + len; o < e;) {
            int64_t m = o % s->mid, run = s->mid - m;
            if (run > e - o)
                run = e - o;
            memcpy(d + (o - o0), s->p + m, sizeof(float) * (size_t)run);
            o += run;
        }
        break;
    default: fe_gather(j, s, o0, len, d); break;
    }
}

/* t = a op (input s over output [o0, o0 + len)); t may be a; scratch
 * takes a gathered tile. */
static void fe_apply(const fe_job *j, int op, const fe_src *s, int64_t o0, int64_t len, const float *a, float *t,
                     float *scratch)
{
    switch (s->kind) {
    case SRC_FULL: fe_binary(op, a, s->p + o0, 0.0f, t, len); break;
    case SRC_SCALAR: fe_binary(op, a, NULL, s->p[0], t, len); break;
    case SRC_CHAN:
        for (int64_t o = o0, e = o0 + len; o < e;) {
            int64_t q = o / s->inner, end = (q + 1) * s->inner;
            if (end > e)
                end = e;
            fe_binary(op, a + (o - o0), NULL, s->p[q % s->mid], t + (o - o0), end - o);
            o = end;
        }
        break;
    case SRC_ROW:
        for (int64_t o = o0, e = o0 + len; o < e;) {
            int64_t m = o % s->mid, run = s->mid - m;
            if (run > e - o)
                run = e - o;
            fe_binary(op, a + (o - o0), s->p + m, 0.0f, t + (o - o0), run);
            o += run;
        }
        break;
    default:
        fe_gather(j, s, o0, len, scratch);
        fe_binary(op, a, scratch, 0.0f, t, len);
        break;
    }
}

/* Tiles [t0, t1). The chain runs in y's tile itself when no extra input
 * shares y's bytes (j->direct), else in a local buffer stored at the end;
 * the first op reads x straight from its tensor when x has y's shape. */
static void fe_task(void *arg, int64_t t0, int64_t t1, int thread)
{
    const fe_job *j = arg;
    _Alignas(64) float buf[FE_TILE];
    _Alignas(64) float scratch[FE_TILE];
    for (int64_t tile = t0; tile < t1; tile++) {
        int64_t o0 = tile * FE_TILE, len = j->n - o0 < FE_TILE ? j->n - o0 : FE_TILE;
        float *t = j->direct ? j->y + o0 : buf;
        const float *a = t;
        if (j->src[0].kind == SRC_FULL)
            a = j->src[0].p + o0;
        else
            fe_load(j, &j->src[0], o0, len, t);
        int next = 1;
        for (int k = 0; k < j->nops; k++) {
            int op = j->ops[k];
            if (mge_fused_binary_ok(op))
                fe_apply(j, op, &j->src[next++], o0, len, a, t, scratch);
            else
                fe_unary(op, j->alpha, a, t, len);
            a = t;
        }
        if (!j->direct)
            memcpy(j->y + o0, buf, sizeof(float) * (size_t)len);
    }
}

/* ---------------------------------------------------------------- setup */

/* Output dims and per-input strides (0 where broadcast), collapsed: size-1
 * dims dropped, dim d merged into the next kept one when every input has
 * st[d] == st[next] * dims[next]. 0 when the shapes do not broadcast to y. */
static int fe_layout(fe_job *j, mge_tensor *const *in, const mge_tensor *y)
{
    int nin = j->nin, nd = 0;
    for (int k = 0; k < nin; k++)
        if (in[k]->ndim > nd)
            nd = in[k]->ndim;
    if (y->ndim != nd)
        return 0;
    int64_t st[FE_MAXIN][MGE_MAX_DIMS], tot[FE_MAXIN];
    for (int k = 0; k < nin; k++)
        tot[k] = 1;
    for (int d = nd - 1; d >= 0; d--) {
        for (int k = 0; k < nin; k++) {
            int i = in[k]->ndim - nd + d;
            int64_t dk = i >= 0 ? in[k]->dims[i] : 1;
            if (dk != 1 && dk != y->dims[d])
                return 0;
            st[k][d] = dk == 1 ? 0 : tot[k];
            tot[k] *= dk;
        }
    }
    /* walk from the last dim, keeping merged dims in reverse */
    int64_t cd[MGE_MAX_DIMS], cs[FE_MAXIN][MGE_MAX_DIMS];
    int nc = 0;
    for (int d = nd - 1; d >= 0; d--) {
        if (y->dims[d] == 1)
            continue;
        int merge = nc > 0;
        for (int k = 0; merge && k < nin; k++)
            merge = st[k][d] == cs[k][nc - 1] * cd[nc - 1];
        if (merge) {
            cd[nc - 1] *= y->dims[d];
            continue;   /* the merged dim keeps the inner stride */
        }
        cd[nc] = y->dims[d];
        for (int k = 0; k < nin; k++)
            cs[k][nc] = st[k][d];
        nc++;
    }
    if (nc == 0) {   /* one element */
        cd[0] = 1;
        for (int k = 0; k < nin; k++)
            cs[k][0] = 0;
        nc = 1;
    }
    j->nd = nc;
    for (int c = 0; c < nc; c++)
        j->dims[c] = cd[nc - 1 - c];
    for (int k = 0; k < nin; k++) {
        fe_src *s = &j->src[k];
        s->p = in[k]->data;
        int64_t contig = 1;
        int full = 1, nz = 0, at = -1;
        for (int c = nc - 1; c >= 0; c--) {
            s->st[c] = cs[k][nc - 1 - c];
            full &= s->st[c] == contig;
            if (s->st[c] != 0)
                nz++, at = c;
            contig *= j->dims[c];
        }
        if (full)
            s->kind = SRC_FULL;
        else if (nz == 0)
            s->kind = SRC_SCALAR;
        else if (nz == 1 && s->st[at] == 1) {
            int64_t inner = 1;
            for (int c = at + 1; c < nc; c++)
                inner *= j->dims[c];
            s->mid = j->dims[at];
            s->inner = inner;
            s->kind = inner == 1 ? SRC_ROW : SRC_CHAN;
            if ((inner == 1 ? s->mid : inner) < FE_MINRUN)
                s->kind = SRC_GEN;   /* short runs: gathering beats a call per run */
        } else {
            s->kind = SRC_GEN;
        }
    }
    return 1;
}

static int fe_overlap(const mge_tensor *a, const mge_tensor *b)
{
    const char *pa = a->data, *pb = b->data;
    size_t na = sizeof(float) * (size_t)mge_tensor_numel(a), nb = sizeof(float) * (size_t)mge_tensor_numel(b);
    return na && nb && pa < pb + nb && pb < pa + na;
}

static int fe_costly(int op)
{
    switch (op) {
    case MGE_OP_ADD:
    case MGE_OP_SUB:
    case MGE_OP_MUL:
    case MGE_OP_MAXIMUM:
    case MGE_OP_MINIMUM: return 0;
    }
    return !cpu_act_cheap(op);
}

static mge_status cpu_fused_elem(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                 mge_tensor *const *out, mge_error *err)
{
    const mge_attr *ops = mge_node_attr(n, MGE_KEY_ops);
    mge_tensor *y = out[0];
    if (!ops || ops->n < 1 || ops->n > MGE_MAX_DIMS || n->nin > FE_MAXIN || y->dtype != MGE_F32)
        return cpu_fallback(ctx, n, in, out, err);   /* ref explains what is wrong */
    fe_job j;
    memset(&j, 0, sizeof j);
    int nbin = 0, costly = 0;
    for (int k = 0; k < ops->n; k++) {
        int op = (int)ops->i[k];
        if (mge_fused_binary_ok(op))
            nbin++;
        else if (!mge_fused_unary_ok(op))
            return cpu_fallback(ctx, n, in, out, err);
        j.ops[k] = op;
        costly |= fe_costly(op);
    }
    j.nops = ops->n;
    j.nin = n->nin;
    if (n->nin != 1 + nbin)
        return cpu_fallback(ctx, n, in, out, err);
    for (int k = 0; k < n->nin; k++)
        if (in[k]->dtype != MGE_F32 || (!in[k]->data && mge_tensor_numel(in[k]) > 0))
            return cpu_fallback(ctx, n, in, out, err);
    if (!fe_layout(&j, in, y))
        return cpu_fallback(ctx, n, in, out, err);
    j.alpha = (float)mge_node_float(n, MGE_KEY_alpha, 0.01);
    j.n = mge_tensor_numel(y);
    j.y = y->data;
    if (j.n == 0)
        return MGE_OK;
    /* Working in y's tile would change an extra input that shares y's
     * bytes (x * x in place) before it is read; x itself may be y. */
    j.direct = !fe_overlap(in[0], y) || (in[0]->data == y->data && j.src[0].kind == SRC_FULL);
    for (int k = 1; k < n->nin; k++)
        j.direct &= !fe_overlap(in[k], y);
    int64_t ntiles = (j.n + FE_TILE - 1) / FE_TILE;
    int64_t grain = (costly ? CPU_GRAIN / 8 : CPU_GRAIN) / FE_TILE;
    cpu_parallel(ctx, ntiles, grain < 1 ? 1 : grain, fe_task, &j);
    return MGE_OK;
}

void mge_cpu_register_fused_elem(mge_backend *b)
{
    cpu_isa_avx2();   /* decided once, before any kernel runs on pool threads */
    b->k[MGE_OP_FUSED_ELEMWISE][MGE_F32] = (mge_kernel){.run = cpu_fused_elem, .ws = cpu_ref_ws};
}
