/* mge-dump — print a model (text form plus a summary, JSON, Graphviz DOT)
 * or a tensor stream (NPY records, .npz) in human-readable form. */
#include "cli.h"
#include "dump_place.h"
#include "inputs.h"

#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void help(void)
{
    printf("Usage: %s [options] [FILE|-]\n"
           "Print a model (text form or .mge) as text with a summary, JSON or Graphviz\n"
           "DOT; or print the tensors of an NPY stream or .npz with their statistics.\n"
           "\n"
           "  -o FILE              write to FILE (default: stdout)\n"
           "      --json           one JSON object (keys in mge-dump(1))\n"
           "      --dot            a Graphviz digraph of the model\n"
           "      --params OUT.npz export the model's parameters by name\n"
           "      --batch B[,B...] batch size for shapes, FLOPs and the memory plan (default 1);\n"
           "                       a list adds one plan row per batch\n"
           "      --shape NAME=DIMS  input NAME's shape: its symbols' values, e.g. x=8x3x224x224;\n"
           "                       naming an input again starts a new set (one plan row each)\n"
           "      --values         print tensor values too (summarized past 1000 elements unless -v)\n"
           "  -q, --quiet          only errors\n"
           "  -v, --verbose        more detail\n"
           "      --threads N      worker threads (1..256)\n"
           "      --device DEV     also show where each node runs on DEV (sim, cuda[:N]) and the copies\n"
           "  -h, --help           show this help and exit\n"
           "      --version        show the version and exit\n"
           "\n"
           "Exit status: 0 success, 1 failure, 2 usage error.\n"
           "\n"
           "Examples:\n"
           "  mge-dump net.mge --batch 8                    # text form, FLOPs per node, memory plan\n"
           "  mge-dump net.mge --params w.npz --json > net.json   # weights by name; the summary as JSON\n"
           "  mge-dump y.npy                                # dtype, shape and statistics of each record\n", cli_prog);
}

/* ---------------------------------------------------------------- helpers */

static void json_num(mge_buf *b, double v)
{
    if (!isfinite(v))
        mge_buf_printf(b, "null");
    else if (v == floor(v) && fabs(v) < 9e15)
        mge_buf_printf(b, "%.0f", v);
    else
        mge_buf_printf(b, "%.9g", v);
}

/* dims as a JSON array; symbolic dims are strings ("N", "(H+1)/2", "?" for plan time). */
static void json_dims(mge_buf *b, int ndim, const int64_t *dims)
{
    mge_buf_put(b, "[", 1);
    for (int i = 0; i < ndim; i++) {
        if (i)
            mge_buf_put(b, ",", 1);
        char d[96];
        if (dims[i] < 0)
            mge_buf_printf(b, "\"%s\"", mge_dim_str(dims[i], d, sizeof d));
        else
            mge_buf_printf(b, "%lld", (long long)dims[i]);
    }
    mge_buf_put(b, "]", 1);
}

static const char *human(double v, char *buf, size_t n)
{
    const char *u[] = {"", "K", "M", "G", "T", "P"};
    int k = 0;
    while (fabs(v) >= 1000 && k < 5) {
        v /= 1000;
        k++;
    }
    snprintf(buf, n, k ? "%.2f %sFLOP" : "%.0f FLOP%s", v, u[k]);
    return buf;
}

static double elem(const mge_tensor *t, int64_t i)
{
    const void *d = t->data;
    switch (t->dtype) {
    case MGE_F32: return ((const float *)d)[i];
    case MGE_F16: return mge_f16_to_f32(((const uint16_t *)d)[i]);
    case MGE_BF16: return mge_bf16_to_f32(((const uint16_t *)d)[i]);
    case MGE_I8: case MGE_QS8: return ((const int8_t *)d)[i];
    case MGE_U8: return ((const uint8_t *)d)[i];
    case MGE_I32: case MGE_QS32: return ((const int32_t *)d)[i];
    case MGE_I64: return (double)((const int64_t *)d)[i];
    case MGE_BOOL: return ((const uint8_t *)d)[i] != 0;
    case MGE_F64: case MGE_I16: case MGE_U16: case MGE_U32: case MGE_U64: return mge_dtype_get(t->dtype, d, i);
    default: return NAN;
    }
}

/* ---------------------------------------------------------------- model */

typedef struct model_info {
    mge_buf rows;        /* with --batch lists or several --shape sets: one row per binding */
    mge_binding bind;    /* every symbol's value, or have_shapes = 0 */
    int have_shapes;
    int symbolic;        /* print templates: symbols beyond N and no --shape */
    char shapes_msg[512];
    int *ndims;
    int64_t *dims;       /* concrete shapes at batch, MGE_MAX_DIMS per value */
    double *flops;
    double total;
    int have_plan;
    mge_plan_stats plan;
    char plan_msg[1024];
} model_info;

static int model_analyze(const mge_graph *g, const char *where, model_info *mi)
{
    mge_error err;
    mge_error_clear(&err);
    mi->ndims = calloc((size_t)g->nvalues + 1, sizeof *mi->ndims);
    mi->dims = calloc(((size_t)g->nvalues + 1) * MGE_MAX_DIMS, sizeof *mi->dims);
    mi->flops = calloc((size_t)g->nnodes + 1, sizeof *mi->flops);
    if (!mi->ndims || !mi->dims || !mi->flops) {
        cli_error(NULL, "out of memory");
        return -1;
    }
    /* symbols other than N need a value from --shape: without one there
     * are no concrete shapes, FLOPs or plan, only the symbolic model */
    int64_t syms[MGE_MAX_SYMS];
    int ns = mge_graph_symbols(g, syms, MGE_MAX_SYMS);
    for (int i = 0; i < ns && i < MGE_MAX_SYMS; i++)
        if (!mge_binding_get(&mi->bind, syms[i], NULL)) {
            if (syms[i] == MGE_DIM_N) {
                mge_binding_set(&mi->bind, MGE_DIM_N, 1, NULL);
                continue;
            }
            snprintf(mi->shapes_msg, sizeof mi->shapes_msg,
                     "no value for the symbol %s: give the inputs' shapes with --shape NAME=DIMS", mge_dim_name(syms[i]));
            snprintf(mi->plan_msg, sizeof mi->plan_msg, "%s", mi->shapes_msg);
            return 0;
        }
    if (mge_graph_shapes(g, &mi->bind, mi->ndims, mi->dims, &err)) {
        cli_mge_error(where, &err);
        return -1;
    }
    mi->have_shapes = 1;
    for (int i = 0; i < g->nnodes; i++) {
        mi->flops[i] = mge_graph_node_flops(g, i, mi->ndims, mi->dims);
        mi->total += mi->flops[i];
    }
    int one = g->loss;
    int nout = g->noutputs ? g->noutputs : g->loss >= 0 ? 1 : 0;
    const int *outs = g->noutputs ? g->outputs : &one;
    if (nout == 0) {
        snprintf(mi->plan_msg, sizeof mi->plan_msg, "the model has no outputs");
    } else if (mge_plan_graph(g, &mi->bind, nout, outs, &mi->plan, &err)) {
        snprintf(mi->plan_msg, sizeof mi->plan_msg, "%s", err.msg);
    } else {
        mi->have_plan = 1;
    }
    return 0;
}

static void model_info_free(model_info *mi)
{
    free(mi->ndims);
    free(mi->dims);
    free(mi->flops);
    mge_buf_free(&mi->rows);
}

/* Node shapes: concrete at the binding, or the symbolic template (with
 * '?' for dims known only at plan time) when there is no binding. */
static const char *vshape(const mge_graph *g, const model_info *mi, int v, char *buf, size_t n)
{
    if (!mi->have_shapes || mi->symbolic)
        return mge_shape_str(g->values[v].dtype, g->values[v].ndim, g->values[v].dims, buf, n);
    return mge_shape_str(g->values[v].dtype, mi->ndims[v], &mi->dims[(size_t)v * MGE_MAX_DIMS], buf, n);
}

/* "batch 1" for batch-only models, else the binding ("N=1,H=224,W=224"). */
static const char *bind_label(const model_info *mi, char *buf, size_t n)
{
    if (!mi->have_shapes)
        snprintf(buf, n, "symbolic");
    else if (mi->bind.n == 1 && mi->bind.sym[0] == MGE_DIM_N)
        snprintf(buf, n, "batch %lld", (long long)mi->bind.val[0]);
    else
        mge_binding_str(&mi->bind, buf, n);
    return buf;
}

/* Parameter bytes by dtype (optimizer state left out, as
 * mge_graph_param_stats counts): the size a quantized model saves. */
static void dtype_bytes(const mge_graph *g, int64_t *bytes)
{
    for (int d = 0; d < MGE_NDTYPES; d++)
        bytes[d] = 0;
    for (int v = 0; v < g->nvalues; v++) {
        const mge_value *x = &g->values[v];
        if (x->kind == MGE_VAL_INPUT || x->kind == MGE_VAL_NODE || mge_value_is_opt_state(x))
            continue;
        int64_t n = 1;
        for (int k = 0; k < x->ndim; k++)
            n *= x->dims[k] > 0 ? x->dims[k] : 1;
        bytes[x->dtype] += n * (int64_t)mge_dtype_size(x->dtype);
    }
}

/* The keys of an int8 node's output scale and zero point; 0 for other ops. */
static int quant_keys(const mge_node *nd, int *kz)
{
    switch (nd->op) {
    case MGE_OP_QUANTIZE:
    case MGE_OP_DEQUANTIZE: *kz = MGE_KEY_zero; return MGE_KEY_scale;
    case MGE_OP_QCONV2D:
    case MGE_OP_QLINEAR:
    case MGE_OP_QADD: *kz = MGE_KEY_y_zero; return MGE_KEY_y_scale;
    default: return 0;
    }
}

/* The output scale and zero point of an int8 node ("0.0123/-128"), or "". */
static const char *quant_str(const mge_node *nd, char *buf, size_t n)
{
    int kz, ks = quant_keys(nd, &kz);
    buf[0] = 0;
    if (ks)
        snprintf(buf, n, "%.4g/%lld", mge_node_float(nd, ks, 0), (long long)mge_node_int(nd, kz, 0));
    return buf;
}

static void model_text(const mge_graph *g, const model_info *mi, mge_buf *b)
{
    char s1[256], h[32], bl[256];
    mge_buf_printf(b, "\n# ---- summary (%s)\n", bind_label(mi, bl, sizeof bl));
    for (int pass = 0; pass < 2; pass++) {
        int n = pass ? g->noutputs : g->ninputs;
        const int *vs = pass ? g->outputs : g->inputs;
        mge_buf_printf(b, "# %s:%s", pass ? "outputs" : "inputs ", n ? "" : " (none)");
        for (int i = 0; i < n; i++) {
            const mge_value *v = &g->values[vs[i]];
            mge_buf_printf(b, "%s %s %s", i ? "," : "", v->name, mge_shape_str(v->dtype, v->ndim, v->dims, s1, sizeof s1));
        }
        mge_buf_printf(b, "\n");
    }
    int64_t pc, pb;
    mge_graph_param_stats(g, &pc, &pb);
    mge_buf_printf(b, "# params:  %lld values, %lld bytes\n", (long long)pc, (long long)pb);
    int64_t db[MGE_NDTYPES];
    dtype_bytes(g, db);
    int ndt = 0, quant = 0;
    for (int d = 0; d < MGE_NDTYPES; d++)
        ndt += db[d] > 0;
    if (ndt > 1 || db[MGE_QS8] || db[MGE_F16] || db[MGE_BF16]) {
        mge_buf_printf(b, "# by dtype:");
        for (int d = 0, k = 0; d < MGE_NDTYPES; d++)
            if (db[d])
                mge_buf_printf(b, "%s %s %lld bytes", k++ ? "," : "", mge_dtype_name((mge_dtype)d), (long long)db[d]);
        mge_buf_printf(b, "\n");
    }
    for (int i = 0; i < g->nnodes; i++)
        quant |= quant_str(&g->nodes[i], s1, sizeof s1)[0] != 0;
    int wn = 4, wo = 2, ws = 5;
    for (int i = 0; i < g->nnodes; i++) {
        const mge_node *nd = &g->nodes[i];
        int l = (int)strlen(nd->name);
        wn = l > wn ? l : wn;
        const mge_opinfo *oi = mge_op_info(nd->op);
        l = oi ? (int)strlen(oi->name) : 1;
        wo = l > wo ? l : wo;
        l = nd->nout ? (int)strlen(vshape(g, mi, nd->out[0], s1, sizeof s1)) : 0;
        ws = l > ws ? l : ws;
    }
    /* the compute precision column only for models with bf16 layers */
    int bf16 = 0;
    double bf16_flops = 0;
    for (int i = 0; i < g->nnodes; i++)
        if (mge_node_bf16(&g->nodes[i]))
            bf16++, bf16_flops += mi->flops[i];
    mge_buf_printf(b, "#\n# %-*s  %-*s  %-*s  %15s%s%s\n", wn, "node", wo, "op", ws, "shape", "FLOPs",
                   bf16 ? "  precision" : "", quant ? "  scale/zero" : "");
    for (int i = 0; i < g->nnodes; i++) {
        const mge_node *nd = &g->nodes[i];
        const mge_opinfo *oi = mge_op_info(nd->op);
        char qs[64];
        const char *prec = mge_node_attr(nd, MGE_KEY_precision) ? (mge_node_bf16(nd) ? "bf16" : "f32") : "";
        int q = quant_str(nd, qs, sizeof qs)[0] != 0;
        mge_buf_printf(b, "# %-*s  %-*s  %-*s  %15.0f%s%-*s%s%s\n", wn, nd->name, wo, oi ? oi->name : "?", ws,
                       nd->nout ? vshape(g, mi, nd->out[0], s1, sizeof s1) : "", mi->flops[i],
                       bf16 && (*prec || q) ? "  " : "", q ? 9 : 0, bf16 ? prec : "", q ? "  " : "", qs);
    }
    mge_buf_printf(b, "# %-*s  %15.0f (%s)\n", wn + wo + ws + 4, "total", mi->total, human(mi->total, h, sizeof h));
    if (bf16) {
        const char *kn = "", *why = "";
        int lv = mge_cpu_bf16_kernels(&kn, &why);
        mge_buf_printf(b, "# bf16: %d layers, %.1f%% of the FLOPs (here: %s%s%s)\n", bf16,
                       mi->total > 0 ? 100.0 * bf16_flops / mi->total : 0.0, lv ? kn : "computed in f32",
                       *why ? "; " : "", why);
    }
    if (mi->have_plan) {
        const mge_plan_stats *p = &mi->plan;
        mge_buf_printf(b, "#\n# memory plan (%s): arena %zu bytes, lower bound %zu (ratio %.2f),"
                          " no reuse %zu, workspace %zu\n", bind_label(mi, bl, sizeof bl), p->arena_bytes,
                       p->lower_bound, p->lower_bound ? (double)p->arena_bytes / (double)p->lower_bound : 1.0,
                       p->no_reuse_bytes, p->workspace_bytes);
        mge_buf_printf(b, "# buffers %d, in place %d\n", p->nbuffers, p->ninplace);
    } else {
        mge_buf_printf(b, "#\n# memory plan: unavailable (%s)\n", mi->plan_msg);
    }
}

static void json_value_list(mge_buf *b, const mge_graph *g, int n, const int *vs)
{
    mge_buf_put(b, "[", 1);
    for (int i = 0; i < n; i++) {
        const mge_value *v = &g->values[vs[i]];
        mge_buf_printf(b, "%s{\"name\":", i ? "," : "");
        cli_json_str(b, v->name);
        mge_buf_printf(b, ",\"dtype\":\"%s\",\"shape\":", mge_dtype_name(v->dtype));
        json_dims(b, v->ndim, v->dims);
        mge_buf_put(b, "}", 1);
    }
    mge_buf_put(b, "]", 1);
}

/* "nnodes" and "op_counts": nodes per op, in the order the ops first
 * appear, so a CI check reads e.g. .op_counts.qconv2d without walking the nodes. */
static void json_op_counts(mge_buf *b, const mge_graph *g)
{
    int count[MGE_NOPS] = {0};
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i].op >= 0 && g->nodes[i].op < MGE_NOPS)
            count[g->nodes[i].op]++;
    mge_buf_printf(b, "\"nnodes\":%d,\"op_counts\":{", g->nnodes);
    for (int i = 0, k = 0; i < g->nnodes; i++) {
        int op = g->nodes[i].op;
        if (op < 0 || op >= MGE_NOPS || count[op] == 0)
            continue;
        const mge_opinfo *oi = mge_op_info(op);
        mge_buf_printf(b, "%s", k++ ? "," : "");
        cli_json_str(b, oi ? oi->name : "?");
        mge_buf_printf(b, ":%d", count[op]);
        count[op] = 0;   /* printed */
    }
    mge_buf_put(b, "}", 1);
}

static void model_json(const mge_graph *g, const model_info *mi, mge_buf *b)
{
    mge_buf_printf(b, "{\"kind\":\"model\",\"inputs\":");
    json_value_list(b, g, g->ninputs, g->inputs);
    mge_buf_printf(b, ",\"outputs\":");
    json_value_list(b, g, g->noutputs, g->outputs);
    int64_t pc, pb;
    mge_graph_param_stats(g, &pc, &pb);
    mge_buf_printf(b, ",\"params\":{\"count\":%lld,\"bytes\":%lld,\"by_dtype\":{", (long long)pc, (long long)pb);
    int64_t db[MGE_NDTYPES];
    dtype_bytes(g, db);
    for (int d = 0, k = 0; d < MGE_NDTYPES; d++)
        if (db[d])
            mge_buf_printf(b, "%s\"%s\":%lld", k++ ? "," : "", mge_dtype_name((mge_dtype)d), (long long)db[d]);
    mge_buf_printf(b, "}},");
    json_op_counts(b, g);
    mge_buf_printf(b, ",\"nodes\":[");
    for (int i = 0; i < g->nnodes; i++) {
        const mge_node *nd = &g->nodes[i];
        const mge_opinfo *oi = mge_op_info(nd->op);
        mge_buf_printf(b, "%s{\"name\":", i ? "," : "");
        cli_json_str(b, nd->name);
        mge_buf_printf(b, ",\"op\":");
        cli_json_str(b, oi ? oi->name : "?");
        for (int side = 0; side < 2; side++) {
            mge_buf_printf(b, ",\"%s\":[", side ? "outputs" : "inputs");
            int n = side ? nd->nout : nd->nin;
            for (int k = 0; k < n; k++) {
                if (k)
                    mge_buf_put(b, ",", 1);
                cli_json_str(b, g->values[side ? nd->out[k] : nd->in[k]].name);
            }
            mge_buf_put(b, "]", 1);
        }
        mge_buf_printf(b, ",\"shape\":");
        if (nd->nout) {
            int v = nd->out[0];
            json_dims(b, mi->ndims[v], &mi->dims[(size_t)v * MGE_MAX_DIMS]);
        } else {
            mge_buf_printf(b, "[]");
        }
        mge_buf_printf(b, ",\"flops\":");
        json_num(b, mi->flops[i]);
        int kz, ks = quant_keys(nd, &kz);
        if (ks)
            mge_buf_printf(b, ",\"scale\":%.9g,\"zero\":%lld", mge_node_float(nd, ks, 0),
                           (long long)mge_node_int(nd, kz, 0));
        mge_buf_put(b, "}", 1);
    }
    mge_buf_printf(b, "],\"flops_total\":");
    json_num(b, mi->total);
    int64_t nb = 1;
    mge_binding_get(&mi->bind, MGE_DIM_N, &nb);
    mge_buf_printf(b, ",\"batch\":%lld,\"binding\":", (long long)nb);
    if (mi->have_shapes) {
        mge_buf_put(b, "{", 1);
        for (int i = 0; i < mi->bind.n; i++)
            mge_buf_printf(b, "%s\"%s\":%lld", i ? "," : "", mge_dim_name(mi->bind.sym[i]), (long long)mi->bind.val[i]);
        mge_buf_put(b, "}", 1);
    } else {
        mge_buf_printf(b, "null");
    }
    mge_buf_printf(b, ",\"plan\":");
    if (mi->have_plan)
        mge_buf_printf(b, "{\"arena_bytes\":%zu,\"lower_bound\":%zu,\"no_reuse_bytes\":%zu,\"workspace_bytes\":%zu}",
                       mi->plan.arena_bytes, mi->plan.lower_bound, mi->plan.no_reuse_bytes, mi->plan.workspace_bytes);
    else
        mge_buf_printf(b, "null");
    mge_buf_printf(b, ",\"meta\":{");
    for (int i = 0; i < g->nmeta; i++) {
        if (i)
            mge_buf_put(b, ",", 1);
        cli_json_str(b, g->meta[i].key);
        mge_buf_put(b, ":", 1);
        cli_json_str(b, g->meta[i].value);
    }
    mge_buf_printf(b, "}}\n");
}

static void model_dot(const mge_graph *g, const model_info *mi, mge_buf *b)
{
    char s1[256];
    mge_buf_printf(b, "digraph model {\n  rankdir=TB;\n  node [shape=box, fontname=\"Helvetica\"];\n");
    for (int i = 0; i < g->ninputs; i++) {
        int v = g->inputs[i];
        mge_buf_printf(b, "  \"v:%s\" [shape=ellipse, label=\"%s\\n%s\"];\n", g->values[v].name, g->values[v].name,
                       vshape(g, mi, v, s1, sizeof s1));
    }
    for (int i = 0; i < g->nnodes; i++) {
        const mge_node *nd = &g->nodes[i];
        const mge_opinfo *oi = mge_op_info(nd->op);
        mge_buf_printf(b, "  \"n:%s\" [label=\"%s\\n%s\\n%s\"];\n", nd->name, nd->name, oi ? oi->name : "?",
                       nd->nout ? vshape(g, mi, nd->out[0], s1, sizeof s1) : "");
        for (int k = 0; k < nd->nin; k++) {
            const mge_value *v = &g->values[nd->in[k]];
            if (v->kind == MGE_VAL_INPUT)
                mge_buf_printf(b, "  \"v:%s\" -> \"n:%s\";\n", v->name, nd->name);
            else if (v->kind == MGE_VAL_NODE && v->producer >= 0)
                mge_buf_printf(b, "  \"n:%s\" -> \"n:%s\";\n", g->nodes[v->producer].name, nd->name);
        }
    }
    for (int i = 0; i < g->noutputs; i++) {
        const mge_value *v = &g->values[g->outputs[i]];
        mge_buf_printf(b, "  \"o:%s\" [shape=ellipse, style=bold, label=\"output %s\"];\n", v->name, v->name);
        if (v->kind == MGE_VAL_NODE && v->producer >= 0)
            mge_buf_printf(b, "  \"n:%s\" -> \"o:%s\";\n", g->nodes[v->producer].name, v->name);
        else
            mge_buf_printf(b, "  \"v:%s\" -> \"o:%s\";\n", v->name, v->name);
    }
    mge_buf_printf(b, "}\n");
}

/* ---------------------------------------------------------------- tensors */

typedef struct tstats {
    double min, max, mean, std;
    int64_t nan, inf, n;
} tstats;

static void tensor_stats(const mge_tensor *t, tstats *s)
{
    memset(s, 0, sizeof *s);
    s->min = INFINITY;
    s->max = -INFINITY;
    int64_t n = mge_tensor_numel(t);
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = elem(t, i);
        if (isnan(v)) {
            s->nan++;
            continue;
        }
        if (isinf(v)) {
            s->inf++;
            continue;
        }
        s->n++;
        s->min = v < s->min ? v : s->min;
        s->max = v > s->max ? v : s->max;
        sum += v;
    }
    if (s->n) {
        s->mean = sum / (double)s->n;
        for (int64_t i = 0; i < n; i++) {
            double v = elem(t, i);
            if (isfinite(v))
                sq += (v - s->mean) * (v - s->mean);
        }
        s->std = sqrt(sq / (double)s->n);
    } else {
        s->min = s->max = s->mean = s->std = NAN;
    }
}

static void put_elem(mge_buf *b, const mge_tensor *t, int64_t i)
{
    double v = elem(t, i);
    if (t->dtype == MGE_BOOL)
        mge_buf_printf(b, "%s", v != 0 ? "True" : "False");
    else if (!mge_dtype_is_float(t->dtype))
        mge_buf_printf(b, "%lld", t->dtype == MGE_I64 ? (long long)((const int64_t *)t->data)[i] : (long long)v);
    else if (isnan(v))
        mge_buf_printf(b, "nan");
    else if (isinf(v))
        mge_buf_printf(b, "%sinf", v < 0 ? "-" : "");
    else
        mge_buf_printf(b, "%.8g", v);
}

/* numpy-like nested brackets; with summarize, 3 items at each end of a long dim. */
static void put_values(mge_buf *b, const mge_tensor *t, int d, int64_t off, int summarize)
{
    if (t->ndim == 0) {
        put_elem(b, t, 0);
        return;
    }
    int64_t n = t->dims[d], stride = 1;
    for (int k = d + 1; k < t->ndim; k++)
        stride *= t->dims[k];
    mge_buf_put(b, "[", 1);
    for (int64_t i = 0; i < n; i++) {
        if (summarize && n > 6 && i == 3) {
            mge_buf_printf(b, d == t->ndim - 1 ? "... " : "...\n%*s", d == t->ndim - 1 ? 0 : d + 1, "");
            i = n - 4;
            continue;
        }
        if (d == t->ndim - 1) {
            put_elem(b, t, off + i);
            if (i + 1 < n)
                mge_buf_put(b, " ", 1);
        } else {
            put_values(b, t, d + 1, off + i * stride, summarize);
            if (i + 1 < n) {
                mge_buf_put(b, "\n", 1);
                for (int k = 0; k < t->ndim - d - 2; k++)
                    mge_buf_put(b, "\n", 1);
                mge_buf_printf(b, "%*s", d + 1, "");
            }
        }
    }
    mge_buf_put(b, "]", 1);
}

static void tensors_text(const mge_tlist *l, int named, int values, mge_buf *b)
{
    char s1[256];
    mge_buf_printf(b, "%-14s %-24s %14s %14s %14s %14s %6s %6s\n", named ? "# name" : "# index", "shape", "min", "max",
                   "mean", "std", "nan", "inf");
    for (int i = 0; i < l->n; i++) {
        const mge_tensor *t = &l->t[i];
        tstats s;
        tensor_stats(t, &s);
        char idx[32];
        snprintf(idx, sizeof idx, "%d", i);
        mge_buf_printf(b, "%-14s %-24s %14.6g %14.6g %14.6g %14.6g %6lld %6lld\n", named ? l->names[i] : idx,
                       mge_shape_str(t->dtype, t->ndim, t->dims, s1, sizeof s1), s.min, s.max, s.mean, s.std,
                       (long long)s.nan, (long long)s.inf);
        if (values) {
            put_values(b, t, 0, 0, cli_verbose <= 0 && mge_tensor_numel(t) > 1000);
            mge_buf_put(b, "\n\n", 2);
        }
    }
}

static void tensors_json(const mge_tlist *l, int named, int values, mge_buf *b)
{
    mge_buf_printf(b, "{\"kind\":\"tensors\",\"tensors\":[");
    for (int i = 0; i < l->n; i++) {
        const mge_tensor *t = &l->t[i];
        tstats s;
        tensor_stats(t, &s);
        mge_buf_printf(b, "%s{\"index\":%d,\"name\":", i ? "," : "", i);
        if (named)
            cli_json_str(b, l->names[i]);
        else
            mge_buf_printf(b, "null");
        mge_buf_printf(b, ",\"dtype\":\"%s\",\"shape\":", mge_dtype_name(t->dtype));
        json_dims(b, t->ndim, t->dims);
        const char *k[] = {"min", "max", "mean", "std"};
        double v[] = {s.min, s.max, s.mean, s.std};
        for (int j = 0; j < 4; j++) {
            mge_buf_printf(b, ",\"%s\":", k[j]);
            json_num(b, v[j]);
        }
        mge_buf_printf(b, ",\"nan\":%lld,\"inf\":%lld", (long long)s.nan, (long long)s.inf);
        if (values) {
            mge_buf_printf(b, ",\"values\":[");
            int64_t n = mge_tensor_numel(t);
            for (int64_t e = 0; e < n; e++) {
                if (e)
                    mge_buf_put(b, ",", 1);
                json_num(b, elem(t, e));
            }
            mge_buf_put(b, "]", 1);
        }
        mge_buf_put(b, "}", 1);
    }
    mge_buf_printf(b, "]}\n");
}

/* ---------------------------------------------------------------- main */

enum { OPT_JSON = CLI_OPT_FIRST_TOOL, OPT_DOT, OPT_PARAMS, OPT_SHAPE, OPT_BATCH, OPT_VALUES };

/* --shape NAME=D1xD2x...: binds the symbols of input NAME's template. */
static void apply_shape(const mge_graph *g, const char *where, const char *arg, mge_binding *bind)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg)
        cli_usage("--shape: expected NAME=DIMS (e.g. x=1x3x224x224), got '%s'", arg);
    char *name = strndup(arg, (size_t)(eq - arg));
    int64_t dims[MGE_MAX_DIMS];
    int nd = 0;
    const char *p = eq + 1;
    for (;;) {
        char *end;
        long long d = strtoll(p, &end, 10);
        if (end == p || d <= 0 || nd == MGE_MAX_DIMS)
            cli_usage("--shape: bad dimensions in '%s' (positive integers joined by 'x')", arg);
        dims[nd++] = d;
        if (!*end)
            break;
        if (*end != 'x' && *end != 'X' && *end != ',')
            cli_usage("--shape: bad dimensions in '%s' (positive integers joined by 'x')", arg);
        p = end + 1;
    }
    int v = name ? mge_graph_find(g, name) : -1;
    if (v < 0 || g->values[v].kind != MGE_VAL_INPUT) {
        cli_error(where, "--shape: the model has no input named '%s'", name ? name : "");
        exit(1);
    }
    const mge_value *val = &g->values[v];
    char s1[256], s2[256], why[256];
    const char *src[MGE_MAX_SYMS];
    for (int i = 0; i < MGE_MAX_SYMS; i++)
        src[i] = "--batch or an earlier --shape";
    if (bench_bind_dims(val, nd, dims, bind, src, arg, why, sizeof why)) {
        cli_error(where, "--shape %s: input '%s' is %s, which does not fit %s: %s", arg, name,
                  mge_shape_str(val->dtype, val->ndim, val->dims, s1, sizeof s1),
                  mge_shape_str(val->dtype, nd, dims, s2, sizeof s2), why);
        exit(1);
    }
    free(name);
}

/* One row per binding of --batch lists x --shape sets: FLOPs and the plan. */
static void plan_rows(const mge_graph *g, const char *where, const mge_binding *base, const char **shapes,
                      const int *set_of, int nshapes, int nsets, const int64_t *batches, int nbatches, int json,
                      model_info *mi)
{
    if (!json)
        mge_buf_printf(&mi->rows, "#\n# plans, one per binding:\n# %-28s %15s %12s %12s\n", "binding", "FLOPs",
                       "arena", "lower bound");
    int first = 1;
    for (int s = 0; s < nsets; s++)
        for (int k = 0; k < nbatches; k++) {
            model_info r = {0};
            r.bind = *base;
            if (nbatches > 1 || batches[0] > 0)
                mge_binding_set(&r.bind, MGE_DIM_N, batches[k], NULL);
            for (int i = 0; i < nshapes; i++)
                if (set_of[i] == s)
                    apply_shape(g, where, shapes[i], &r.bind);
            char bs[256];
            if (model_analyze(g, where, &r) == 0 && r.have_shapes) {
                mge_binding_str(&r.bind, bs, sizeof bs);
                if (json)
                    mge_buf_printf(&mi->rows, "%s{\"binding\":\"%s\",\"flops_total\":%.0f,\"arena_bytes\":%zu,"
                                   "\"lower_bound\":%zu}", first ? "" : ",", bs, r.total,
                                   r.have_plan ? r.plan.arena_bytes : (size_t)0,
                                   r.have_plan ? r.plan.lower_bound : (size_t)0);
                else
                    mge_buf_printf(&mi->rows, "# %-28s %15.0f %12zu %12zu\n", bs, r.total,
                                   r.have_plan ? r.plan.arena_bytes : (size_t)0,
                                   r.have_plan ? r.plan.lower_bound : (size_t)0);
                first = 0;
            }
            model_info_free(&r);
        }
}

int main(int argc, char **argv)
{
    cli_init("mge-dump", argv);
    static const struct option longs[] = {
        CLI_LONG_COMMON,
        {"output", 1, 0, 'o'},
        {"json", 0, 0, OPT_JSON},
        {"dot", 0, 0, OPT_DOT},
        {"params", 1, 0, OPT_PARAMS},
        {"shape", 1, 0, OPT_SHAPE},
        {"batch", 1, 0, OPT_BATCH},
        {"values", 0, 0, OPT_VALUES},
        {0, 0, 0, 0},
    };
    cli_common co = {0};
    const char *out = NULL, *params = NULL;
    const char **shapes = calloc((size_t)argc + 1, sizeof *shapes);
    if (!shapes)
        return 1;
    int nshapes = 0, json = 0, dot = 0, values = 0;
    int64_t batch = -1, batches[64];
    int nbatches = 0;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":o:fqvh", longs, NULL)) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        case OPT_JSON: json = 1; break;
        case OPT_DOT: dot = 1; break;
        case OPT_PARAMS: params = optarg; break;
        case OPT_SHAPE: shapes[nshapes++] = optarg; break;
        case OPT_BATCH: /* B or a list B1,B2,...: one plan row each */
            nbatches = 0;
            for (char *p = optarg, *e;; p = e + 1) {
                char item[32];
                e = strchr(p, ',');
                size_t l = e ? (size_t)(e - p) : strlen(p);
                if (l == 0 || l >= sizeof item || nbatches == 64)
                    cli_usage("--batch %s: expected B or B1,B2,... (at most 64)", optarg);
                memcpy(item, p, l);
                item[l] = 0;
                batches[nbatches++] = cli_long("--batch", item, 1, 1L << 30);
                if (!e)
                    break;
            }
            batch = batches[0];
            break;
        case OPT_VALUES: values = 1; break;
        default:
            if (!cli_common_opt(c, optarg, &co, help))
                cli_usage("unhandled option");
        }
    }
    if (json && dot)
        cli_usage("--json and --dot cannot be combined");
    if (argc - optind > 1)
        cli_usage("too many arguments (one file at most)");
    cli_check_device(co.device);
    const char *in = optind < argc ? argv[optind] : "-";
    const char *where = cli_name(in);

    void *buf = NULL;
    size_t n = 0;
    int mapped = 0;
    if (cli_slurp(in, &buf, &n, &mapped))
        return 1;
    mge_error err;
    mge_error_clear(&err);
    mge_buf b = {0};
    int rc = 1;

    mge_file_kind kind = mge_sniff_kind(buf, n < MGE_SNIFF_BYTES ? n : MGE_SNIFF_BYTES);
    if (kind != MGE_KIND_UNKNOWN && kind != MGE_KIND_EMPTY && kind != MGE_KIND_MGE && kind != MGE_KIND_NPY &&
        kind != MGE_KIND_NPZ && kind != MGE_KIND_ZIP && kind != MGE_KIND_ONNX) {
        /* what it is and how to get something mge-dump reads: weights files
         * get the .npz recipe, the rest the model advice */
        int weights = kind == MGE_KIND_TORCH || kind == MGE_KIND_PICKLE || kind == MGE_KIND_SAFETENSORS;
        mge_sniff_refuse(kind, weights ? MGE_SNIFF_WEIGHTS : MGE_SNIFF_MODEL, in, &err);
        cli_mge_error(where, &err);
        goto done;
    }
    if (kind == MGE_KIND_NPY || kind == MGE_KIND_NPZ || kind == MGE_KIND_ZIP) {
        if (dot || params || nshapes || batch >= 0)
            cli_usage("%s is a tensor stream: --dot, --params, --shape and --batch apply to models", where);
        mge_tlist l = {0};
        int named = mge_npz_is_zip(buf, n);
        mge_status s = MGE_OK;
        if (named) {
            s = mge_npz_read_mem(buf, n, &l, &err);
        } else {
            size_t off = 0;
            while (off < n && !s) {
                mge_tensor t = {0};
                size_t used = 0;
                s = mge_npy_read_mem((const char *)buf + off, n - off, &used, &t, &err);
                if (s) {
                    mge_error_prefix(&err, "record %d (byte %zu)", l.n, off);
                    break;
                }
                off += used;
                s = mge_tlist_add(&l, "", &t, &err);
                mge_tensor_free(&t);
            }
        }
        if (s) {
            cli_mge_error(where, &err);
        } else {
            if (json)
                tensors_json(&l, named, values, &b);
            else
                tensors_text(&l, named, values, &b);
            rc = cli_write_buf(out, &b, 0, co.force) ? 1 : 0;
        }
        mge_tlist_free(&l);
        goto done;
    }

    if (n == 0) {
        cli_error(where, "the input is empty");
        goto done;
    }
    if (values)
        cli_usage("%s is a model: --values applies to tensor streams (export parameters with --params)", where);
    mge_graph *g = NULL;
    /* stdin has no folder: an ONNX model's external data is then refused */
    char *dir = strcmp(in, "-") ? cli_dirname(in) : NULL;
    mge_status s = mge_model_load_mem(buf, n, dir, &g, &err);
    free(dir);
    if (s) {
        cli_mge_error(where, &err);
        goto done;
    }
    cli_import_warnings(where, g);
    model_info mi = {0};
    {
        int64_t syms[MGE_MAX_SYMS];
        int ns = mge_graph_symbols(g, syms, MGE_MAX_SYMS);
        for (int i = 0; i < ns && i < MGE_MAX_SYMS; i++)
            mi.symbolic |= syms[i] != MGE_DIM_N && nshapes == 0;
    }
    if (batch > 0)
        mge_binding_set(&mi.bind, MGE_DIM_N, batch, NULL);
    /* shape sets: naming an input again starts a new set (as mge-bench) */
    int set_of[256], nsets = nshapes ? 1 : 0;
    for (int i = 0; i < nshapes && i < 256; i++) {
        set_of[i] = nsets - 1;
        size_t li = strcspn(shapes[i], "=");
        for (int j = i - 1; j >= 0 && set_of[j] == nsets - 1; j--)
            if (strcspn(shapes[j], "=") == li && strncmp(shapes[j], shapes[i], li) == 0) {
                set_of[i] = nsets++;
                break;
            }
    }
    mge_binding base = mi.bind;
    for (int i = 0; i < nshapes && i < 256; i++)
        if (set_of[i] == 0)
            apply_shape(g, where, shapes[i], &mi.bind);
    if (model_analyze(g, where, &mi) == 0) {
        if (nsets > 1 || nbatches > 1) /* one row per binding, after the first */
            plan_rows(g, where, &base, shapes, set_of, nshapes < 256 ? nshapes : 256, nsets ? nsets : 1, batches,
                      nbatches ? nbatches : 1, json, &mi);
        int placed = co.device && strcmp(co.device, "cpu") != 0;
        if (json) {
            model_json(g, &mi, &b);
            if (mi.rows.n) { /* "plans": [...] goes inside the object */
                while (b.n && (b.p[b.n - 1] == '\n' || b.p[b.n - 1] == '}'))
                    if (b.p[--b.n] == '}')
                        break;
                mge_buf_printf(&b, ",\"plans\":[%.*s]}\n", (int)mi.rows.n, mi.rows.p);
            }
            if (placed) {
                /* the placement goes inside the object */
                while (b.n && (b.p[b.n - 1] == '\n' || b.p[b.n - 1] == '}'))
                    if (b.p[--b.n] == '}')
                        break;
                if (dump_placement(g, co.device, &mi.bind, cli_threads(&co), 1, &b, where))
                    goto model_done;
                mge_buf_printf(&b, "}\n");
            }
        } else if (dot) {
            model_dot(g, &mi, &b);
        } else if (mge_text_print(g, &b, &err)) {
            cli_mge_error(where, &err);
            goto model_done;
        } else {
            model_text(g, &mi, &b);
            if (mi.rows.n)
                mge_buf_put(&b, mi.rows.p, mi.rows.n);
            if (placed && dump_placement(g, co.device, &mi.bind, cli_threads(&co), 0, &b, where))
                goto model_done;
        }
        if (params) {
            mge_tlist l = {0};
            mge_buf nb = {0};
            /* Parameters without values are exported as mge-opt would fill them (seed 0). */
            if (mge_graph_init_params(g, 0, &err) || mge_params_export(g, &l, &err) || mge_npz_write(&l, &nb, &err)) {
                cli_mge_error(where, &err);
                mge_tlist_free(&l);
                mge_buf_free(&nb);
                goto model_done;
            }
            int bad = cli_write_buf(params, &nb, 1, 1);
            cli_note(params, "%d tensors", l.n);
            mge_tlist_free(&l);
            mge_buf_free(&nb);
            if (bad)
                goto model_done;
        }
        rc = cli_write_buf(out, &b, 0, co.force) ? 1 : 0;
    }
model_done:
    model_info_free(&mi);
    mge_graph_free(g);
done:
    mge_buf_free(&b);
    free(shapes);
    mge_file_unslurp(buf, n, mapped);
    return rc;
}
