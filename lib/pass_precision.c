/* pass_precision.c — which layers compute in bf16 (mge-opt --precision, the
 * bf16 pass of -O3), and the edit distance the "did you mean" lists share.
 *
 * bf16 goes on the layers whose cost is products: dense and grouped-by-1
 * convolutions, linear, matmul and attention. Depthwise convolutions are
 * bound by memory, not arithmetic, so they stay f32, as do elementwise ops
 * (bf16 would only round them). The attribute rides through the later
 * passes: fuse-activation and layout copy it, and Winograd and the layout
 * pass's Winograd form leave bf16 convs direct (the AMX direct conv beats
 * f32 Winograd, which cannot run on bf16 products). */
#include "backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t mge_str_distance(const char *a, size_t na, const char *b, size_t nb)
{
    /* three rows of the classic table (the swap reaches two rows back) */
    size_t *d = malloc(3 * (nb + 1) * sizeof *d);
    if (!d)
        return (size_t)-1;
    size_t *p2 = d, *p1 = d + nb + 1, *c = d + 2 * (nb + 1);
    for (size_t j = 0; j <= nb; j++)
        p1[j] = j;
    for (size_t i = 1; i <= na; i++) {
        c[0] = i;
        for (size_t j = 1; j <= nb; j++) {
            size_t best = p1[j - 1] + (a[i - 1] != b[j - 1]);
            if (p1[j] + 1 < best)
                best = p1[j] + 1;
            if (c[j - 1] + 1 < best)
                best = c[j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && p2[j - 2] + 1 < best)
                best = p2[j - 2] + 1;
            c[j] = best;
        }
        size_t *t = p2;
        p2 = p1, p1 = c, c = t;
    }
    size_t r = p1[nb];
    free(d);
    return r;
}

int mge_node_bf16(const mge_node *n)
{
    return mge_node_int(n, MGE_KEY_precision, MGE_PRECISION_F32) == MGE_PRECISION_BF16;
}

int mge_graph_bf16_count(const mge_graph *g)
{
    int n = 0;
    for (int i = 0; i < g->nnodes; i++)
        n += mge_node_bf16(&g->nodes[i]);
    return n;
}

int mge_cpu_bf16_kernels(const char **name, const char **why)
{
    const mge_backend_iface *cpu = mge_backend_cpu_iface();
    const char *note = "";
    int l = cpu->bf16 ? cpu->bf16(&note) : MGE_BF16_NONE;
    if (why)
        *why = note ? note : "";
    if (name)
        *name = l == MGE_BF16_AMX ? "amx-bf16" : l == MGE_BF16_AVX512 ? "avx512-bf16" : "none (f32)";
    return l;
}

/* Whether node n may compute in bf16. */
static int eligible(const mge_graph *g, const mge_node *n)
{
    switch (n->op) {
    case MGE_OP_CONV2D:
    case MGE_OP_FUSED_CONV2D:
    case MGE_OP_CONV2D_NCHWC:
        if (mge_node_int(n, MGE_KEY_groups, 1) != 1)
            return 0;
        break;
    case MGE_OP_LINEAR:
    case MGE_OP_FUSED_LINEAR:
    case MGE_OP_MATMUL:
    case MGE_OP_SDPA: break;
    default: return 0;
    }
    for (int k = 0; k < 2 && k < n->nin; k++)
        if (g->values[n->in[k]].dtype != MGE_F32)
            return 0;
    return 1;
}

static int names_node(const mge_graph *g, const mge_node *n, const char *name)
{
    if (n->name && strcmp(n->name, name) == 0)
        return 1;
    for (int k = 0; k < n->nout; k++)
        if (strcmp(g->values[n->out[k]].name, name) == 0)
            return 1;
    return 0;
}

/* "no node 'x'" with up to five node names close to it. */
static mge_status no_node(const mge_graph *g, const char *name, mge_error *err)
{
    char close[256] = "";
    size_t used = 0, nn = strlen(name);
    int found = 0;
    for (int i = 0; i < g->nnodes && found < 5; i++) {
        const char *c = g->nodes[i].name;
        if (!c)
            continue;
        size_t k = strlen(c), d = mge_str_distance(name, nn, c, k);
        int near = (nn >= 3 && (strstr(c, name) != NULL)) || d <= (nn <= 4 ? 1u : 3u);
        if (!near)
            continue;
        int w = snprintf(close + used, sizeof close - used, "%s%s", found ? ", " : "", c);
        if (w < 0 || (size_t)w >= sizeof close - used)
            break;
        used += (size_t)w;
        found++;
    }
    if (found)
        return mge_error_set(err, MGE_ERR_INVALID, "--keep-f32: the model has no node '%s' (close: %s)", name, close);
    return mge_error_set(err, MGE_ERR_INVALID, "--keep-f32: the model has no node '%s' (mge-dump lists the nodes)",
                         name);
}

mge_status mge_precision_set(mge_graph *g, int prec, int nkeep, const char *const *keep, int *nset, char *note,
                             size_t note_size, mge_error *err)
{
    if (note && note_size)
        note[0] = 0;
    if (nset)
        *nset = 0;
    if (prec != MGE_PRECISION_F32 && prec != MGE_PRECISION_BF16)
        return mge_error_set(err, MGE_ERR_INVALID, "precision %d: expected f32 or bf16", prec);
    /* check every name before changing anything */
    for (int k = 0; k < nkeep; k++) {
        int hit = 0;
        for (int i = 0; i < g->nnodes && !hit; i++)
            hit = names_node(g, &g->nodes[i], keep[k]);
        if (!hit)
            return no_node(g, keep[k], err);
    }
    size_t used = 0;
    for (int k = 0; k < nkeep; k++)
        for (int i = 0; i < g->nnodes; i++) {
            const mge_node *n = &g->nodes[i];
            if (!names_node(g, n, keep[k]) || eligible(g, n) || !note || used >= note_size)
                continue;
            const mge_opinfo *oi = mge_op_info(n->op);
            int w = snprintf(note + used, note_size - used, "%s%s (%s) computes in f32 anyway", used ? "; " : "",
                             keep[k], oi ? oi->name : "?");
            used += w > 0 ? (size_t)w : 0;
        }
    int count = 0;
    for (int i = 0; i < g->nnodes; i++) {
        mge_node *n = &g->nodes[i];
        if (!eligible(g, n))
            continue;
        int want = prec;
        for (int k = 0; k < nkeep && want != MGE_PRECISION_F32; k++)
            if (names_node(g, n, keep[k]))
                want = MGE_PRECISION_F32;
        for (int a = 0; a < n->nattr; a++)
            if (n->attrs[a].key == MGE_KEY_precision)
                n->attrs[a].i[0] = want;
        count += want == prec;
    }
    if (nset)
        *nset = count;
    return MGE_OK;
}

/* The bf16 pass (-O3): bf16 where this machine's cpu kernels run it on AMX
 * tiles. vdpbf16ps alone (AVX512-BF16 without AMX, as on AMD Zen 4) does
 * no more multiply-adds per cycle than f32 FMAs and loses Winograd, so
 * there (and without bf16) an -O3 model keeps f32; --precision bf16 still
 * asks for it anywhere. */
mge_status mge_pass_bf16(mge_graph **gp, int *changed, mge_error *err)
{
    *changed = 0;
    const mge_backend_iface *cpu = mge_backend_cpu_iface();
    if (!cpu->bf16 || cpu->bf16(NULL) != MGE_BF16_AMX)
        return MGE_OK;
    mge_graph *g = *gp;
    int before = 0;
    for (int i = 0; i < g->nnodes; i++)
        before += eligible(g, &g->nodes[i]) && mge_node_bf16(&g->nodes[i]);
    int n = 0;
    mge_status s = mge_precision_set(g, MGE_PRECISION_BF16, 0, NULL, &n, NULL, 0, err);
    *changed = !s && n != before;
    return s;
}
