/* test_mgefile.c — the .mge container: byte-identical round trips (plain and
 * compressed), tensor data and quantization parameters, every truncation
 * and every single-byte change of a small model refused cleanly, newer
 * versions and absurd shapes refused, hostile but checksum-valid edits
 * (unknown op, unknown key, wrong type tag, wrong stored shape), no_state,
 * borrowing from a mapping and model loading by content.
 *
 * With MGE_FUZZ_SEEDS=DIR set, it also writes seed files for tests/fuzz. */
#include "internal.h"
#include "unit.h"
#include "unit_graph.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

static mge_error err;

/* ---------------------------------------------------------------- graph building */

static int conv(mge_graph *g, const char *name, int x, int out, int k, int pad)
{
    mge_attr a[3] = {A(MGE_KEY_out, out), A(MGE_KEY_kernel, k), A(MGE_KEY_pad, pad)};
    return layer(g, name, MGE_OP_CONV2D, x, 3, a);
}

static int linear(mge_graph *g, const char *name, int x, int out)
{
    mge_attr a = A(MGE_KEY_out, out);
    return layer(g, name, MGE_OP_LINEAR, x, 1, &a);
}

static int pool(mge_graph *g, const char *name, int x, int k)
{
    mge_attr a = A(MGE_KEY_kernel, k);
    return node(g, name, MGE_OP_MAXPOOL2D, 1, &x, 1, &a);
}

/* LeNet from DESIGN.md, with metadata and initialized parameters. */
static mge_graph *lenet(void)
{
    mge_graph *g = mge_graph_new();
    int64_t xd[4] = {MGE_DIM_N, 1, 28, 28}, ld[1] = {MGE_DIM_N};
    int x = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 4, xd, &err);
    int label = mge_graph_add_value(g, "label", MGE_VAL_INPUT, MGE_I32, 1, ld, &err);
    int h = conv(g, "conv1", x, 32, 3, 1);
    h = un(g, "relu1", MGE_OP_RELU, h);
    h = pool(g, "pool1", h, 2);
    h = conv(g, "conv2", h, 64, 3, 1);
    h = un(g, "relu2", MGE_OP_RELU, h);
    h = pool(g, "pool2", h, 2);
    h = un(g, "flat", MGE_OP_FLATTEN, h);
    h = linear(g, "fc1", h, 128);
    h = un(g, "act1", MGE_OP_RELU, h);
    int logits = linear(g, "fc2", h, 10);
    int in[2] = {logits, label};
    int loss = node(g, "loss", MGE_OP_CROSS_ENTROPY, 2, in, 0, NULL);
    if (x < 0 || label < 0 || logits < 0 || loss < 0) {
        mge_graph_free(g);
        return NULL;
    }
    CHECK_OK(mge_graph_add_output(g, logits, &err), err);
    g->loss = loss;
    CHECK_OK(mge_graph_set_meta(g, "producer", "test_mgefile", &err), err);
    CHECK_OK(mge_graph_set_meta(g, "epochs", "3", &err), err);
    CHECK_OK(mge_graph_set_meta(g, "lr", "0.01", &err), err);
    CHECK_OK(mge_graph_init_params(g, 42, &err), err);
    return g;
}

/* A small model that still uses every feature of the format: two inputs in
 * an order unlike their value order, a const, state, a quantized param
 * (per channel) and a qs32 one (per tensor), an f16 param with a layout tag,
 * an attribute of every type, metadata of both types, a large zero state
 * tensor that compresses. */
static mge_graph *small_model(void)
{
    mge_graph *g = mge_graph_new();
    int64_t xd[4] = {MGE_DIM_N, 3, 8, 8}, yd[2] = {MGE_DIM_N, 5};
    int y = mge_graph_add_value(g, "y", MGE_VAL_INPUT, MGE_F32, 2, yd, &err);
    int x = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 4, xd, &err);
    int h = conv(g, "c1", x, 4, 3, 1);
    mge_attr la = A(MGE_KEY_alpha, 0);
    la.f = 0.125;
    h = node(g, "lr1", MGE_OP_LEAKY_RELU, 1, &h, 1, &la);
    h = pool(g, "p1", h, 2);
    mge_attr fa = A(MGE_KEY_start, 1);
    h = node(g, "fl", MGE_OP_FLATTEN, 1, &h, 1, &fa);
    h = linear(g, "fc", h, 5);
    int64_t cd[1] = {5};
    int c = mge_graph_add_value(g, "shift", MGE_VAL_CONST, MGE_F32, 1, cd, &err);
    int in[2] = {h, c};
    h = node(g, "shifted", MGE_OP_ADD, 2, in, 0, NULL);
    mge_attr ca = A(MGE_KEY_dtype, MGE_F16);
    int hc = node(g, "half", MGE_OP_CAST, 1, &h, 1, &ca);
    int in2[2] = {h, y};
    int loss = node(g, "loss", MGE_OP_MSE, 2, in2, 0, NULL);
    int64_t qd[2] = {4, 6}, sd[1] = {1000}, hd[2] = {2, 3};
    int q = mge_graph_add_value(g, "q.weight", MGE_VAL_PARAM, MGE_QS8, 2, qd, &err);
    int q32 = mge_graph_add_value(g, "q.bias", MGE_VAL_PARAM, MGE_QS32, 1, qd, &err);
    int st = mge_graph_add_value(g, "bn.running_var", MGE_VAL_STATE, MGE_F32, 1, sd, &err);
    int hf = mge_graph_add_value(g, "hp", MGE_VAL_PARAM, MGE_F16, 2, hd, &err);
    int ni = mge_graph_add_value(g, "later", MGE_VAL_PARAM, MGE_F32, 1, cd, &err);
    if (y < 0 || x < 0 || h < 0 || hc < 0 || loss < 0 || q < 0 || q32 < 0 || st < 0 || hf < 0 || ni < 0) {
        mge_graph_free(g);
        return NULL;
    }
    g->values[ni].init = mge_strdup("normal(0.5)");
    CHECK_OK(mge_graph_add_output(g, hc, &err), err);
    CHECK_OK(mge_graph_add_output(g, h, &err), err);
    g->loss = loss;
    CHECK_OK(mge_graph_set_meta(g, "step", "-17", &err), err);
    CHECK_OK(mge_graph_set_meta(g, "zip", "007", &err), err);
    CHECK_OK(mge_graph_set_meta(g, "note", "a b\tc", &err), err);
    CHECK_OK(mge_graph_set_meta(g, "big", "9223372036854775807", &err), err);
    CHECK_OK(mge_graph_set_meta(g, "toobig", "9223372036854775808", &err), err);
    /* data for everything except "later" (its init spec stays) */
    int with_data[] = {c, q, q32, st, hf};
    for (size_t i = 0; i < sizeof with_data / sizeof *with_data; i++) {
        mge_value *v = &g->values[with_data[i]];
        v->data = calloc(1, sizeof *v->data);
        CHECK_OK(mge_tensor_alloc(v->data, v->dtype, v->ndim, v->dims, &err), err);
        unsigned char *p = v->data->data;
        if (v->kind != MGE_VAL_STATE)
            for (size_t k = 0; k < v->data->nbytes; k++)
                p[k] = (unsigned char)(k * 37 + i * 11 + 1);
    }
    mge_tensor *qt = g->values[q].data;
    qt->q.axis = 0;
    qt->q.nscale = 4;
    qt->q.scale = malloc(4 * sizeof(float));
    for (int k = 0; k < 4; k++)
        qt->q.scale[k] = 0.01f * (float)(k + 1);
    qt->q.zero = 3;
    mge_tensor *q32t = g->values[q32].data;
    q32t->q.axis = -1;
    q32t->q.nscale = 1;
    q32t->q.scale = malloc(sizeof(float));
    q32t->q.scale[0] = 1e-4f;
    ((mge_tensor *)g->values[hf].data)->layout = MGE_LAYOUT_NHWC;
    CHECK_OK(mge_graph_init_params(g, 7, &err), err);
    return g;
}

static mge_attr AI(int key, int n, const int64_t *v)
{
    mge_attr a = A(key, v[0]);
    a.n = n;
    for (int i = 0; i < n; i++)
        a.i[i] = v[i];
    return a;
}

/* Every op of ops.def at least once, so each attribute of each schema
 * travels through the file (also the richest fuzzing seed). */
static mge_graph *all_ops(void)
{
    mge_graph *g = mge_graph_new();
    int64_t xd[4] = {MGE_DIM_N, 4, 6, 6};
    int x = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 4, xd, &err);
    int ok = x >= 0;
    mge_attr eps = A(MGE_KEY_eps, 0);
    eps.f = 1e-3;
    int bn = layer(g, "bn", MGE_OP_BATCHNORM, x, 1, &eps);
    int64_t m1[1] = {-1}, p0231[4] = {0, 2, 3, 1}, r2[2] = {0, -1}, ax1[1] = {1}, k2[2] = {2, 2};
    mge_attr lna = AI(MGE_KEY_axis, 1, m1);
    int ln = layer(g, "ln", MGE_OP_LAYERNORM, bn, 1, &lna);
    static const int unary[] = {MGE_OP_RELU, MGE_OP_RELU6, MGE_OP_SIGMOID, MGE_OP_TANH, MGE_OP_GELU, MGE_OP_SILU,
                                MGE_OP_HSWISH, MGE_OP_HSIGMOID, MGE_OP_EXP, MGE_OP_LOG, MGE_OP_SQRT, MGE_OP_NEG,
                                MGE_OP_ABS, MGE_OP_GLOBAL_AVGPOOL};
    int h = ln;
    char nm[32];
    for (size_t i = 0; i < sizeof unary / sizeof *unary; i++) {
        snprintf(nm, sizeof nm, "u%zu", i);
        if (unary[i] != MGE_OP_GLOBAL_AVGPOOL)
            ok &= (h = un(g, nm, unary[i], h)) >= 0;
        else
            ok &= un(g, nm, unary[i], h) >= 0;
    }
    static const int binary[] = {MGE_OP_ADD, MGE_OP_SUB, MGE_OP_MUL, MGE_OP_DIV, MGE_OP_POW, MGE_OP_MAXIMUM,
                                 MGE_OP_MINIMUM};
    for (size_t i = 0; i < sizeof binary / sizeof *binary; i++) {
        int in[2] = {h, x};
        snprintf(nm, sizeof nm, "b%zu", i);
        ok &= (h = node(g, nm, binary[i], 2, in, 0, NULL)) >= 0;
    }
    mge_attr dp = A(MGE_KEY_p, 0);
    dp.f = 0.25;
    ok &= (h = node(g, "drop", MGE_OP_DROPOUT, 1, &h, 1, &dp)) >= 0;
    mge_attr ap[3] = {AI(MGE_KEY_kernel, 2, k2), A(MGE_KEY_ceil_mode, 1), A(MGE_KEY_count_include_pad, 0)};
    ok &= node(g, "avg", MGE_OP_AVGPOOL2D, 1, &h, 3, ap) >= 0;
    mge_attr ax = AI(MGE_KEY_axis, 1, ax1);
    ok &= node(g, "sm", MGE_OP_SOFTMAX, 1, &h, 1, &ax) >= 0;
    ok &= node(g, "lsm", MGE_OP_LOG_SOFTMAX, 1, &h, 1, &ax) >= 0;
    mge_attr kd[2] = {ax, A(MGE_KEY_keepdim, 1)};
    ok &= node(g, "sum", MGE_OP_SUM, 1, &h, 2, kd) >= 0;
    ok &= node(g, "mean", MGE_OP_MEAN, 1, &h, 0, NULL) >= 0;
    ok &= node(g, "max", MGE_OP_MAX, 1, &h, 1, &ax) >= 0;
    ok &= node(g, "am", MGE_OP_ARGMAX, 1, &h, 1, &ax) >= 0;
    mge_attr rs = AI(MGE_KEY_shape, 2, r2);
    int r = node(g, "rs", MGE_OP_RESHAPE, 1, &h, 1, &rs);
    ok &= r >= 0;
    mge_attr tp = AI(MGE_KEY_perm, 4, p0231);
    ok &= node(g, "tp", MGE_OP_TRANSPOSE, 1, &h, 1, &tp) >= 0;
    int cin[3] = {h, x, h};
    mge_attr ca = AI(MGE_KEY_axis, 1, ax1);
    ok &= node(g, "cat", MGE_OP_CONCAT, 3, cin, 1, &ca) >= 0;
    mge_attr sa[4] = {AI(MGE_KEY_axis, 1, ax1), A(MGE_KEY_start, 1), A(MGE_KEY_end, 3), A(MGE_KEY_step, 2)};
    ok &= node(g, "sl", MGE_OP_SLICE, 1, &h, 4, sa) >= 0;
    int min[2] = {r, r};
    mge_attr tb = A(MGE_KEY_transpose_b, 1);
    ok &= node(g, "mm", MGE_OP_MATMUL, 2, min, 1, &tb) >= 0;
    mge_attr ct = A(MGE_KEY_dtype, MGE_BF16);
    ok &= node(g, "cast", MGE_OP_CAST, 1, &h, 1, &ct) >= 0;
    mge_attr lr = A(MGE_KEY_alpha, 0);
    lr.f = -0.0;
    ok &= node(g, "lrelu", MGE_OP_LEAKY_RELU, 1, &h, 1, &lr) >= 0;
    mge_attr mp[4] = {AI(MGE_KEY_kernel, 2, k2), A(MGE_KEY_stride, 1), A(MGE_KEY_dilation, 2),
                      A(MGE_KEY_pad, 1)};
    ok &= node(g, "mp", MGE_OP_MAXPOOL2D, 1, &h, 4, mp) >= 0;
    int fl = un(g, "fl", MGE_OP_FLATTEN, h);
    int fc = linear(g, "fc", fl, 3);
    int64_t ld[1] = {MGE_DIM_N};
    int label = mge_graph_add_value(g, "label", MGE_VAL_INPUT, MGE_I64, 1, ld, &err);
    int ce_in[2] = {fc, label};
    int ce = node(g, "ce", MGE_OP_CROSS_ENTROPY, 2, ce_in, 0, NULL);
    mge_attr cva[4] = {A(MGE_KEY_out, 8), A(MGE_KEY_kernel, 3), A(MGE_KEY_groups, 4), A(MGE_KEY_bias, 0)};
    int c = layer(g, "gconv", MGE_OP_CONV2D, x, 4, cva);
    ok &= fl >= 0 && fc >= 0 && label >= 0 && ce >= 0 && c >= 0;
    if (!ok) {
        mge_graph_free(g);
        return NULL;
    }
    CHECK_OK(mge_graph_add_output(g, fc, &err), err);
    CHECK_OK(mge_graph_add_output(g, c, &err), err);
    g->loss = ce;
    CHECK_OK(mge_graph_init_params(g, 11, &err), err);
    return g;
}

/* ---------------------------------------------------------------- helpers */

static int write_graph(const mge_graph *g, int compress, int no_state, mge_buf *b)
{
    mge_write_opts o = {compress, no_state};
    memset(b, 0, sizeof *b);
    mge_status s = mge_file_write(g, &o, b, &err);
    CHECK_OK(s, err);
    return s == MGE_OK;
}

/* The small model and its bytes (compressed or not); 0 after a failed
 * check when either cannot be made. */
static int small_model_bytes(int compress, mge_graph **g, mge_buf *b)
{
    *g = small_model();
    if (*g && write_graph(*g, compress, 0, b))
        return 1;
    mge_graph_free(*g);
    *g = NULL;
    CHECK(0);
    return 0;
}

/* Reads a copy of exactly n bytes (so a sanitizer sees any over-read). */
static mge_status read_copy(const void *p, size_t n, mge_graph **g, mge_error *e)
{
    void *c = malloc(n ? n : 1);
    if (n)
        memcpy(c, p, n);
    mge_status s = mge_file_read(c, n, 0, g, e);
    free(c);
    return s;
}

static void same_tensor(const char *name, const mge_tensor *a, const mge_tensor *b)
{
    CHECK_MSG(a && b, "%s: data missing", name);
    if (!a || !b)
        return;
    CHECK(a->dtype == b->dtype && a->ndim == b->ndim && a->layout == b->layout);
    CHECK(memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->ndim) == 0);
    CHECK_MSG(a->nbytes == b->nbytes && memcmp(a->data, b->data, a->nbytes) == 0, "%s: data differs", name);
    CHECK(a->q.nscale == b->q.nscale && a->q.zero == b->q.zero);
    if (a->q.nscale > 0) {
        CHECK(a->q.axis == b->q.axis);
        CHECK(memcmp(a->q.scale, b->q.scale, sizeof(float) * (size_t)a->q.nscale) == 0);
    }
}

/* a and b describe the same model; with same_order, value indices agree too. */
static void same_graph(const mge_graph *a, const mge_graph *b, int same_order)
{
    CHECK(a->nvalues == b->nvalues && a->nnodes == b->nnodes);
    CHECK(a->ninputs == b->ninputs && a->noutputs == b->noutputs);
    CHECK(a->nmeta == b->nmeta);
    if (a->nvalues != b->nvalues || a->nnodes != b->nnodes || a->ninputs != b->ninputs ||
        a->noutputs != b->noutputs || a->nmeta != b->nmeta)
        return;
    for (int v = 0; v < a->nvalues; v++) {
        const mge_value *va = &a->values[v];
        int w = mge_graph_find(b, va->name);
        CHECK_MSG(w >= 0, "%s missing", va->name);
        if (w < 0)
            continue;
        if (same_order)
            CHECK(w == v);
        const mge_value *vb = &b->values[w];
        CHECK(va->kind == vb->kind && va->dtype == vb->dtype && va->ndim == vb->ndim);
        CHECK(memcmp(va->dims, vb->dims, sizeof(int64_t) * (size_t)va->ndim) == 0);
        CHECK_MSG((!va->init && !vb->init) || (va->init && vb->init && strcmp(va->init, vb->init) == 0),
                  "%s: init differs", va->name);
        CHECK(!va->data == !vb->data);
        if (va->data && vb->data)
            same_tensor(va->name, va->data, vb->data);
    }
    for (int i = 0; i < a->nnodes; i++) {
        const mge_node *na = &a->nodes[i], *nb = &b->nodes[i];
        CHECK(strcmp(na->name, nb->name) == 0 && na->op == nb->op);
        CHECK(na->nin == nb->nin && na->nout == nb->nout && na->nattr == nb->nattr);
        for (int k = 0; k < na->nin && k < nb->nin; k++)
            CHECK(strcmp(a->values[na->in[k]].name, b->values[nb->in[k]].name) == 0);
        for (int k = 0; k < na->nout && k < nb->nout; k++)
            CHECK(strcmp(a->values[na->out[k]].name, b->values[nb->out[k]].name) == 0);
        for (int k = 0; k < na->nattr && k < nb->nattr; k++) {
            const mge_attr *x = &na->attrs[k], *y = &nb->attrs[k];
            CHECK(x->key == y->key);
            switch (mge_key_type(x->key)) {
            case MGE_ATTR_FLOAT: CHECK(x->f == y->f); break;
            case MGE_ATTR_INTS:
            case MGE_ATTR_OPS:
            case MGE_ATTR_FLOATS:
                CHECK(x->n == y->n && memcmp(x->i, y->i, sizeof(int64_t) * (size_t)x->n) == 0);
                break;
            default: CHECK((x->i[0] != 0) == (y->i[0] != 0) && x->i[0] == y->i[0]); break;
            }
        }
    }
    for (int i = 0; i < a->ninputs; i++)
        CHECK(strcmp(a->values[a->inputs[i]].name, b->values[b->inputs[i]].name) == 0);
    for (int i = 0; i < a->noutputs; i++)
        CHECK(strcmp(a->values[a->outputs[i]].name, b->values[b->outputs[i]].name) == 0);
    CHECK((a->loss < 0) == (b->loss < 0));
    if (a->loss >= 0 && b->loss >= 0)
        CHECK(strcmp(a->values[a->loss].name, b->values[b->loss].name) == 0);
    for (int i = 0; i < a->nmeta; i++) {
        const char *v = mge_graph_get_meta(b, a->meta[i].key);
        CHECK_MSG(v && strcmp(v, a->meta[i].value) == 0, "meta %s: '%s' vs '%s'", a->meta[i].key, a->meta[i].value,
                  v ? v : "(none)");
    }
}

/* Recomputes the header and section CRCs after a test edits a file, so the
 * edit reaches the parser instead of the checksum check. */
static uint32_t rd32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void wr32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void wr64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void fix_crcs(unsigned char *p, size_t n)
{
    size_t pos = 36;
    for (int s = 0; s < 3 && pos + 12 <= n; s++) {
        uint64_t len = rd32(p + pos + 4) | (uint64_t)rd32(p + pos + 8) << 32;
        if (len > n - pos - 16)
            break;
        wr32(p + pos + 12 + len, (uint32_t)crc32(0, p + pos, (uInt)(12 + len)));
        pos += 16 + (size_t)len;
    }
    wr32(p + 32, (uint32_t)crc32(0, p, 32));
}

/* Offset of the first occurrence of a length-prefixed string s, or 0. */
static size_t find_str(const unsigned char *p, size_t n, const char *s)
{
    size_t k = strlen(s);
    for (size_t i = 36; i + 4 + k <= n; i++)
        if (rd32(p + i) == k && memcmp(p + i + 4, s, k) == 0)
            return i;
    return 0;
}

/* Applies an edit with fixed CRCs and expects the read to fail with a
 * message containing want. */
static void expect_edit_fails(const mge_buf *b, size_t at, const void *bytes, size_t k, const char *want)
{
    unsigned char *c = malloc(b->n);
    memcpy(c, b->p, b->n);
    memcpy(c + at, bytes, k);
    fix_crcs(c, b->n);
    mge_graph *g = NULL;
    mge_error e = {0};
    mge_status s = read_copy(c, b->n, &g, &e);
    CHECK_MSG(s != MGE_OK && !g, "edit at %zu accepted (want '%s')", at, want);
    CHECK_MSG(strstr(e.msg, want), "edit at %zu: message '%s' lacks '%s'", at, e.msg, want);
    if (getenv("MGE_TEST_VERBOSE"))
        fprintf(stderr, "edit at %zu: %s\n", at, e.msg);
    mge_graph_free(g);
    free(c);
}

/* ---------------------------------------------------------------- tests */

static void test_lenet_roundtrip(void)
{
    mge_graph *g = lenet();
    CHECK(g != NULL);
    if (!g)
        return;
    mge_buf b1, b2, c1, c2, b3;
    if (!write_graph(g, 0, 0, &b1))
        return;
    CHECK(mge_file_is_mge(b1.p, b1.n));
    CHECK(!mge_file_is_mge(b1.p, 7));
    mge_graph *g2 = NULL;
    CHECK_OK(read_copy(b1.p, b1.n, &g2, &err), err);
    if (g2) {
        same_graph(g, g2, 1);
        CHECK(strcmp(mge_graph_get_meta(g2, "epochs"), "3") == 0);
        CHECK(write_graph(g2, 0, 0, &b2));
        CHECK_MSG(b1.n == b2.n && memcmp(b1.p, b2.p, b1.n) == 0, "rewrite differs (%zu vs %zu bytes)", b1.n, b2.n);
        mge_buf_free(&b2);
    }
    /* a second graph built the same way gives the same bytes */
    mge_graph *g3 = lenet();
    if (g3 && write_graph(g3, 0, 0, &b3)) {
        CHECK(b3.n == b1.n && memcmp(b1.p, b3.p, b1.n) == 0);
        mge_buf_free(&b3);
    }
    mge_graph_free(g3);

    /* compressed: smaller, same graph, stable bytes, and back to plain bytes */
    if (write_graph(g, 1, 0, &c1)) {
        CHECK_MSG(c1.n < b1.n, "compressed %zu >= plain %zu", c1.n, b1.n);
        mge_graph *gc = NULL;
        CHECK_OK(read_copy(c1.p, c1.n, &gc, &err), err);
        if (gc) {
            same_graph(g, gc, 1);
            for (int v = 0; v < gc->nvalues; v++)
                if (gc->values[v].data)
                    CHECK(gc->values[v].data->flags & MGE_TENSOR_OWNED);
            CHECK(write_graph(gc, 1, 0, &c2));
            CHECK(c1.n == c2.n && memcmp(c1.p, c2.p, c1.n) == 0);
            mge_buf_free(&c2);
            CHECK(write_graph(gc, 0, 0, &c2));
            CHECK(b1.n == c2.n && memcmp(b1.p, c2.p, b1.n) == 0);
            mge_buf_free(&c2);
        }
        mge_graph_free(gc);
        mge_buf_free(&c1);
    }
    /* appending to a non-empty buffer: offsets count from the file start */
    mge_buf pre = {0};
    mge_buf_put(&pre, "xyz", 3);
    mge_write_opts o = {0, 0};
    CHECK_OK(mge_file_write(g, &o, &pre, &err), err);
    CHECK(pre.n == b1.n + 3 && memcmp(pre.p + 3, b1.p, b1.n) == 0);
    mge_buf_free(&pre);
    mge_graph_free(g2);
    mge_buf_free(&b1);
    mge_graph_free(g);
}

static void test_small_roundtrip(void)
{
    mge_graph *g = small_model();
    CHECK(g != NULL);
    if (!g)
        return;
    for (int compress = 0; compress <= 1; compress++) {
        mge_buf b1, b2;
        if (!write_graph(g, compress, 0, &b1))
            continue;
        mge_graph *g2 = NULL;
        CHECK_OK(read_copy(b1.p, b1.n, &g2, &err), err);
        if (g2) {
            same_graph(g, g2, 0);
            /* declaration order of inputs is kept apart from value order */
            CHECK(strcmp(g2->values[g2->inputs[0]].name, "y") == 0);
            CHECK(strcmp(mge_graph_get_meta(g2, "step"), "-17") == 0);
            CHECK(strcmp(mge_graph_get_meta(g2, "zip"), "007") == 0);
            CHECK(strcmp(mge_graph_get_meta(g2, "toobig"), "9223372036854775808") == 0);
            int hp = mge_graph_find(g2, "hp");
            CHECK(hp >= 0 && g2->values[hp].data && g2->values[hp].data->layout == MGE_LAYOUT_NHWC);
            int later = mge_graph_find(g2, "later");
            CHECK(later >= 0 && g2->values[later].data && g2->values[later].init &&
                  strcmp(g2->values[later].init, "normal(0.5)") == 0);
            CHECK(write_graph(g2, compress, 0, &b2));
            CHECK_MSG(b1.n == b2.n && memcmp(b1.p, b2.p, b1.n) == 0, "compress=%d: rewrite differs", compress);
            mge_buf_free(&b2);
        }
        mge_graph_free(g2);
        mge_buf_free(&b1);
    }
    mge_graph_free(g);
}

static void test_all_ops_roundtrip(void)
{
    mge_graph *g = all_ops();
    CHECK_MSG(g != NULL, "building the all-ops graph: %s", err.msg);
    if (!g)
        return;
    mge_buf b1, b2;
    if (write_graph(g, 0, 0, &b1)) {
        mge_graph *g2 = NULL;
        CHECK_OK(read_copy(b1.p, b1.n, &g2, &err), err);
        if (g2) {
            same_graph(g, g2, 0);
            CHECK(write_graph(g2, 0, 0, &b2));
            CHECK(b1.n == b2.n && memcmp(b1.p, b2.p, b1.n) == 0);
            mge_buf_free(&b2);
        }
        mge_graph_free(g2);
        mge_buf_free(&b1);
    }
    mge_graph_free(g);
}

/* Enum attributes are stored as their words and float lists as f64s; a
 * word the key does not have is refused naming it and the allowed ones. */
static const char *spatial_src = "input x : f32[N,2,5,6]\n"
                                 "r = resize(x, mode=bilinear, align_corners=true, scales=[2, 0.75])\n"
                                 "p = pad(r, pads=[1, 2, 0, 1], mode=replicate)\n"
                                 "gn = group_norm(p, num_groups=2)\n"
                                 "rn = rms_norm(gn, axis=-2)\n"
                                 "output rn\n";

static mge_graph *spatial_model(void)
{
    mge_graph *g = NULL;
    CHECK_OK(mge_text_parse(spatial_src, strlen(spatial_src), NULL, &g, &err), err);
    return g;
}

static void test_enum_roundtrip(void)
{
    mge_graph *g = spatial_model();
    mge_buf b1, b2;
    if (!g || !write_graph(g, 0, 0, &b1)) {
        mge_graph_free(g);
        return;
    }
    mge_graph *g2 = NULL;
    CHECK_OK(read_copy(b1.p, b1.n, &g2, &err), err);
    if (g2) {
        same_graph(g, g2, 0);
        const mge_node *r = &g2->nodes[0];
        CHECK(mge_node_int(r, MGE_KEY_mode, -1) == MGE_MODE_BILINEAR);
        const mge_attr *sc = mge_node_attr(r, MGE_KEY_scales);
        CHECK(sc && sc->n == 2 && mge_attr_float_at(sc, 0) == 2 && mge_attr_float_at(sc, 1) == 0.75);
        CHECK(write_graph(g2, 0, 0, &b2));
        CHECK(b1.n == b2.n && memcmp(b1.p, b2.p, b1.n) == 0);
        mge_buf_free(&b2);
    }
    mge_graph_free(g2);
    size_t at = find_str((const unsigned char *)b1.p, b1.n, "bilinear");
    CHECK_MSG(at > 0, "the word 'bilinear' is not stored");
    if (at)
        expect_edit_fails(&b1, at + 4, "bicubic!", 8, "attribute 'mode' is 'bicubic!', none of nearest bilinear");
    at = find_str((const unsigned char *)b1.p, b1.n, "replicate");
    if (at)
        expect_edit_fails(&b1, at + 4, "Replicate", 9, "attribute 'mode' is 'Replicate'");
    mge_buf_free(&b1);
    mge_graph_free(g);
}

/* Every prefix of a small model is refused as truncated, without crashing. */
static void test_truncation(void)
{
    mge_graph *g;
    mge_buf b;
    if (!small_model_bytes(1, &g, &b))
        return;
    int bad = 0;
    for (size_t k = 0; k < b.n; k++) {
        mge_graph *r = NULL;
        mge_error e = {0};
        mge_status s = read_copy(b.p, k, &r, &e);
        if (s != MGE_ERR_FORMAT || r || (k > 0 && !strstr(e.msg, "truncated file (needs "))) {
            if (bad++ < 5)
                fprintf(stderr, "prefix %zu: status %d, '%s'\n", k, (int)s, e.msg);
        }
        mge_graph_free(r);
    }
    CHECK_MSG(bad == 0, "%d prefixes of %zu not refused as truncated", bad, b.n);
    /* the exact numbers */
    mge_graph *r = NULL;
    mge_error e = {0};
    read_copy(b.p, 20, &r, &e);
    CHECK_MSG(strcmp(e.msg, "truncated file (needs 8 bytes at offset 16, has 20)") == 0, "%s", e.msg);
    char want[128];
    snprintf(want, sizeof want, "truncated file (needs %zu bytes at offset 0, has %zu)", b.n, b.n - 1);
    read_copy(b.p, b.n - 1, &r, &e);
    CHECK_MSG(strcmp(e.msg, want) == 0, "%s", e.msg);
    /* and trailing bytes are refused too */
    mge_buf_put(&b, "", 1);
    CHECK(read_copy(b.p, b.n, &r, &e) == MGE_ERR_FORMAT && strstr(e.msg, "trailing"));
    mge_buf_free(&b);
    mge_graph_free(g);
}

/* Every single-byte change anywhere in the file is detected. */
static void test_byte_flips(void)
{
    static const unsigned char xors[] = {0x01, 0x80, 0xff, 0x5a};
    for (int compress = 0; compress <= 1; compress++) {
        mge_graph *g = small_model();
        mge_buf b;
        if (!g || !write_graph(g, compress, 0, &b)) {
            mge_graph_free(g);
            CHECK(0);
            return;
        }
        unsigned char *c = malloc(b.n);
        int undetected = 0;
        for (size_t i = 0; i < b.n; i++)
            for (size_t x = 0; x < sizeof xors; x++) {
                memcpy(c, b.p, b.n);
                c[i] ^= xors[x];
                mge_graph *r = NULL;
                mge_error e = {0};
                mge_status s = read_copy(c, b.n, &r, &e);
                if (s == MGE_OK || r || !e.msg[0]) {
                    if (undetected++ < 5)
                        fprintf(stderr, "byte %zu ^ 0x%02x not detected\n", i, xors[x]);
                }
                mge_graph_free(r);
            }
        CHECK_MSG(undetected == 0, "compress=%d: %d of %zu changes undetected", compress, undetected, b.n * 4);
        /* where the change lands decides the message */
        memcpy(c, b.p, b.n);
        c[40] ^= 1; /* inside the metadata section */
        mge_graph *r = NULL;
        mge_error e = {0};
        read_copy(c, b.n, &r, &e);
        CHECK_MSG(strcmp(e.msg, "checksum mismatch in metadata section") == 0, "%s", e.msg);
        memcpy(c, b.p, b.n);
        c[b.n - 1] ^= 1; /* the last tensor's data */
        read_copy(c, b.n, &r, &e);
        CHECK_MSG(strstr(e.msg, "checksum mismatch in tensor '"), "%s", e.msg);
        memcpy(c, b.p, b.n);
        c[20] ^= 1; /* the header */
        read_copy(c, b.n, &r, &e);
        CHECK_MSG(strcmp(e.msg, "checksum mismatch in header") == 0, "%s", e.msg);
        free(c);
        mge_buf_free(&b);
        mge_graph_free(g);
    }
}

static void test_version_and_signature(void)
{
    mge_graph *g;
    mge_buf b;
    if (!small_model_bytes(0, &g, &b))
        return;
    unsigned char *c = malloc(b.n);
    memcpy(c, b.p, b.n);
    wr32(c + 8, MGE_FORMAT_VERSION + 1);
    fix_crcs(c, b.n);
    mge_graph *r = NULL;
    mge_error e = {0};
    CHECK(read_copy(c, b.n, &r, &e) == MGE_ERR_UNSUPPORTED && !r);
    char want[128];
    snprintf(want, sizeof want, "file format version %d is newer than this mge supports (%d)",
             MGE_FORMAT_VERSION + 1, MGE_FORMAT_VERSION);
    CHECK_MSG(strcmp(e.msg, want) == 0, "%s", e.msg);
    /* a huge version, CRC not even fixed: the version is checked first */
    memcpy(c, b.p, b.n);
    wr32(c + 8, 0xffffffffu);
    CHECK(read_copy(c, b.n, &r, &e) == MGE_ERR_UNSUPPORTED && strstr(e.msg, "4294967295 is newer"));
    memcpy(c, b.p, b.n);
    c[3] = 'X';
    CHECK(read_copy(c, b.n, &r, &e) == MGE_ERR_FORMAT && strstr(e.msg, "not an .mge file"));
    CHECK(!mge_file_is_mge(c, b.n));
    CHECK(read_copy("hello", 5, &r, &e) == MGE_ERR_FORMAT && strstr(e.msg, "not an .mge file"));
    CHECK(read_copy("\x89MG", 3, &r, &e) == MGE_ERR_FORMAT && strstr(e.msg, "truncated"));
    free(c);
    mge_buf_free(&b);
    mge_graph_free(g);
}

/* Checksum-valid files that lie: the parser and the graph API catch them. */
static void test_hostile_edits(void)
{
    mge_graph *g;
    mge_buf b;
    if (!small_model_bytes(0, &g, &b))
        return;
    const unsigned char *p = (const unsigned char *)b.p;
    size_t at;
    /* op names and attribute keys are strings in the file */
    CHECK((at = find_str(p, b.n, "leaky_relu")) > 0);
    if (at)
        expect_edit_fails(&b, at + 4, "leaky_relX", 10, "unknown op 'leaky_relX'");
    CHECK((at = find_str(p, b.n, "alpha")) > 0);
    if (at) {
        expect_edit_fails(&b, at + 4, "alphx", 5, "unknown attribute 'alphx'");
        unsigned char tag = MGE_ATTR_INT;
        expect_edit_fails(&b, at + 9, &tag, 1, "type tag");
    }
    /* a value claiming 2^60 elements; a stored output shape inference disagrees with */
    CHECK((at = find_str(p, b.n, "later")) > 0);
    if (at) {
        unsigned char d[8];
        wr64(d, (uint64_t)1 << 60);
        expect_edit_fails(&b, at + 4 + 5 + 3, d, 8, "2^48");
        wr64(d, (uint64_t)-5);
        expect_edit_fails(&b, at + 4 + 5 + 3, d, 8, "not a number or one of the file's 1 symbols");
        unsigned char kind = 9;
        expect_edit_fails(&b, at + 4 + 5, &kind, 1, "unknown kind 9");
    }
    CHECK((at = find_str(p, b.n, "fc")) > 0); /* the value record "fc": f32[N,5] */
    if (at) {
        unsigned char d[8];
        wr64(d, 6);
        expect_edit_fails(&b, at + 4 + 2 + 3 + 8, d, 8, "infers to f32[N,5]");
    }
    /* an input value that reads a later value: refuse before replay */
    CHECK((at = find_str(p, b.n, "q.weight")) > 0);
    if (at) {
        unsigned char d[8];
        wr64(d, (uint64_t)1 << 30);
        unsigned char two[16];
        memcpy(two, d, 8);
        memcpy(two + 8, d, 8);
        /* value says [2^30, 2^30]: 2^60 elements */
        expect_edit_fails(&b, at + 4 + 8 + 3, two, 16, "2^48");
    }
    /* the tensor directory: raw size that does not match the shape */
    unsigned char *c = malloc(b.n);
    memcpy(c, b.p, b.n);
    mge_graph *r = NULL;
    mge_error e = {0};
    CHECK_OK(read_copy(c, b.n, &r, &e), e);
    mge_graph_free(r);
    r = NULL;
    /* counts far beyond the data: the value count is the first field of the graph section */
    size_t gs = 36;
    gs += 16 + (size_t)rd32(p + gs + 4);
    CHECK(memcmp(p + gs, "GRPH", 4) == 0);
    unsigned char big[4];
    wr32(big, 0x7fffffff);
    expect_edit_fails(&b, gs + 12, big, 4, "do not fit");
    /* a section length beyond the file */
    unsigned char len[8];
    wr64(len, (uint64_t)1 << 62);
    expect_edit_fails(&b, gs + 4, len, 8, "runs past the end of the file");
    free(c);
    mge_buf_free(&b);
    mge_graph_free(g);
}

/* The directory: sizes, offsets and compression claims are checked. */
static void test_directory_edits(void)
{
    mge_graph *g = mge_graph_new();
    int64_t d[2] = {3, 4};
    int v = mge_graph_add_value(g, "w", MGE_VAL_PARAM, MGE_F32, 2, d, &err);
    CHECK(v == 0);
    CHECK_OK(mge_graph_init_params(g, 1, &err), err);
    mge_buf b;
    if (!write_graph(g, 0, 0, &b)) {
        mge_graph_free(g);
        return;
    }
    const unsigned char *p = (const unsigned char *)b.p;
    size_t pos = 36;
    for (int s = 0; s < 2; s++)
        pos += 16 + (size_t)rd32(p + pos + 4);
    CHECK(memcmp(p + pos, "TDIR", 4) == 0);
    size_t ent = pos + 12 + 4; /* value u32, dtype, layout, ndim, comp, dims[2], axis, zero, nscale */
    size_t off = ent + 8 + 16 + 12, stored = off + 8, raw = stored + 8;
    unsigned char x[8];
    wr64(x, (uint64_t)1 << 60);
    expect_edit_fails(&b, raw, x, 8, "raw size");
    expect_edit_fails(&b, stored, x, 8, "differs from raw size");
    expect_edit_fails(&b, off, x, 8, "offset");
    unsigned char comp = 1;
    expect_edit_fails(&b, ent + 7, &comp, 1, "bad compressed data");
    comp = 7;
    expect_edit_fails(&b, ent + 7, &comp, 1, "unknown compression 7");
    unsigned char dt = MGE_I32;
    expect_edit_fails(&b, ent + 4, &dt, 1, "does not match");
    unsigned char ns[4];
    wr32(ns, 2);
    expect_edit_fails(&b, ent + 8 + 16 + 8, ns, 4, "quantization scales");
    mge_buf_free(&b);
    mge_graph_free(g);
}

/* A zlib stream claiming a huge raw size is refused before allocating. */
static void test_zlib_bomb_claim(void)
{
    mge_graph *g = mge_graph_new();
    int64_t d[1] = {4096};
    mge_graph_add_value(g, "z", MGE_VAL_STATE, MGE_F32, 1, d, &err);
    CHECK_OK(mge_graph_init_params(g, 1, &err), err);
    mge_buf b;
    if (!write_graph(g, 1, 0, &b)) {
        mge_graph_free(g);
        return;
    }
    const unsigned char *p = (const unsigned char *)b.p;
    size_t pos = 36;
    for (int s = 0; s < 2; s++)
        pos += 16 + (size_t)rd32(p + pos + 4);
    size_t ent = pos + 16;
    CHECK(p[ent + 7] == 1); /* compressed: 16 KiB of zeros */
    /* value and directory both claim 2^40 elements: 4 TiB from a few bytes */
    unsigned char x[8];
    wr64(x, (uint64_t)1 << 40);
    size_t vat = find_str(p, b.n, "z");
    unsigned char *c = malloc(b.n);
    memcpy(c, b.p, b.n);
    memcpy(c + vat + 4 + 1 + 3, x, 8);
    memcpy(c + ent + 8, x, 8);
    wr64(c + ent + 8 + 8 + 12 + 16, (uint64_t)1 << 42);
    fix_crcs(c, b.n);
    mge_graph *r = NULL;
    mge_error e = {0};
    CHECK(read_copy(c, b.n, &r, &e) == MGE_ERR_FORMAT && !r);
    CHECK_MSG(strstr(e.msg, "cannot hold"), "%s", e.msg);
    free(c);
    mge_buf_free(&b);
    mge_graph_free(g);
}

/* Within deflate's 1032:1 for the tensor, but beyond what mge inflates for
 * a file of that size (unpack.h): refused before anything is allocated,
 * naming both sizes. */
static void test_zlib_total_claim(void)
{
    mge_graph *g = mge_graph_new();
    int64_t d[1] = {1 << 20};
    int v = mge_graph_add_value(g, "z", MGE_VAL_STATE, MGE_F32, 1, d, &err);
    mge_value *val = &g->values[v];
    val->data = calloc(1, sizeof *val->data);
    CHECK_OK(mge_tensor_alloc(val->data, MGE_F32, 1, d, &err), err);
    /* one random byte in four: compresses to roughly a third */
    unsigned char *p = val->data->data;
    uint32_t x = 12345;
    for (size_t k = 0; k < val->data->nbytes; k += 4) {
        x = x * 1103515245u + 12345u;
        p[k] = (unsigned char)(x >> 24);
    }
    mge_buf b;
    if (!write_graph(g, 1, 0, &b)) {
        mge_graph_free(g);
        return;
    }
    const unsigned char *q = (const unsigned char *)b.p;
    size_t pos = 36;
    for (int s = 0; s < 2; s++)
        pos += 16 + (size_t)rd32(q + pos + 4);
    size_t ent = pos + 16;
    CHECK(q[ent + 7] == 1);
    uint64_t stored = rd32(q + ent + 8 + 8 + 12 + 8) | (uint64_t)rd32(q + ent + 8 + 8 + 12 + 12) << 32;
    /* 2^27 elements, 512 MiB: under 1032 times the stored bytes, over 100 times and over 256 MiB */
    uint64_t n = (uint64_t)1 << 27;
    CHECK_MSG(n * 4 < 1032 * stored && n * 4 > 100 * stored, "stored %llu", (unsigned long long)stored);
    unsigned char nb[8];
    wr64(nb, n);
    size_t vat = find_str(q, b.n, "z");
    unsigned char *c = malloc(b.n);
    memcpy(c, b.p, b.n);
    memcpy(c + vat + 4 + 1 + 3, nb, 8);
    memcpy(c + ent + 8, nb, 8);
    wr64(c + ent + 8 + 8 + 12 + 16, n * 4);
    fix_crcs(c, b.n);
    mge_graph *r = NULL;
    mge_error e = {0};
    CHECK(read_copy(c, b.n, &r, &e) == MGE_ERR_FORMAT && !r);
    char want[160];
    snprintf(want, sizeof want, "the compressed tensors declare %llu bytes, more than the 268435456 bytes that their "
             "%llu compressed bytes may inflate to", (unsigned long long)(n * 4), (unsigned long long)stored);
    CHECK_MSG(strstr(e.msg, want), "%s", e.msg);
    free(c);
    mge_buf_free(&b);
    mge_graph_free(g);
}

/* A model whose zero tensors would compress beyond that limit is written
 * with them uncompressed, so the reader takes what the writer wrote. */
static void test_zlib_writer_stays_readable(void)
{
    mge_graph *g = mge_graph_new();
    int64_t big[1] = {70 << 20}, small[1] = {4096};   /* 280 MiB and 16 KiB of zeros */
    int vb = mge_graph_add_value(g, "big", MGE_VAL_STATE, MGE_F32, 1, big, &err);
    int vs = mge_graph_add_value(g, "small", MGE_VAL_STATE, MGE_F32, 1, small, &err);
    for (int i = 0; i < 2; i++) {
        mge_value *val = &g->values[i ? vs : vb];
        val->data = calloc(1, sizeof *val->data);   /* calloc: untouched pages cost no memory */
        CHECK_OK(mge_tensor_alloc(val->data, MGE_F32, 1, i ? small : big, &err), err);
    }
    mge_buf b;
    if (!write_graph(g, 1, 0, &b)) {
        mge_graph_free(g);
        return;
    }
    const unsigned char *q = (const unsigned char *)b.p;
    size_t pos = 36;
    for (int s = 0; s < 2; s++)
        pos += 16 + (size_t)rd32(q + pos + 4);
    size_t ent = pos + 16;                    /* "big": stored as it is */
    CHECK(q[ent + 7] == 0);
    CHECK(q[ent + 8 + 8 + 12 + 8 + 8 + 8 + 4 + 7] == 1); /* "small" still compressed */
    CHECK(b.n > ((size_t)70 << 22));
    mge_graph *r = NULL;
    CHECK_OK(mge_file_read(b.p, b.n, 1, &r, &err), err);
    if (r)
        CHECK(r->values[mge_graph_find(r, "big")].data->nbytes == ((size_t)70 << 22));
    mge_graph_free(r);
    mge_buf_free(&b);
    mge_graph_free(g);
}

static void test_no_state(void)
{
    mge_graph *g = small_model();
    if (!g) {
        CHECK(0);
        return;
    }
    int64_t d[1] = {5};
    int m = mge_graph_add_value(g, "fc.weight.__opt.m", MGE_VAL_STATE, MGE_F32, 1, d, &err);
    int used = mge_graph_add_value(g, "shift.__opt.v", MGE_VAL_STATE, MGE_F32, 1, d, &err);
    int shifted = mge_graph_find(g, "shifted");
    int in[2] = {shifted, used};
    int o = node(g, "uses_state", MGE_OP_MUL, 2, in, 0, NULL);
    CHECK(m >= 0 && used >= 0 && o >= 0);
    CHECK_OK(mge_graph_init_params(g, 3, &err), err);
    mge_buf full, lean;
    if (write_graph(g, 0, 0, &full) && write_graph(g, 0, 1, &lean)) {
        CHECK(lean.n < full.n);
        mge_graph *r = NULL;
        CHECK_OK(read_copy(lean.p, lean.n, &r, &err), err);
        if (r) {
            CHECK(mge_graph_find(r, "fc.weight.__opt.m") < 0);  /* unused: dropped */
            int u = mge_graph_find(r, "shift.__opt.v");         /* read by a node: declared, no data */
            CHECK(u >= 0 && !r->values[u].data);
            int rv = mge_graph_find(r, "bn.running_var");       /* ordinary state stays */
            CHECK(rv >= 0 && r->values[rv].data);
            CHECK(r->nvalues == g->nvalues - 1);
        }
        mge_graph_free(r);
        r = NULL;
        CHECK_OK(read_copy(full.p, full.n, &r, &err), err);
        if (r)
            CHECK(mge_graph_find(r, "fc.weight.__opt.m") >= 0 &&
                  r->values[mge_graph_find(r, "fc.weight.__opt.m")].data);
        mge_graph_free(r);
    }
    mge_buf_free(&full);
    mge_buf_free(&lean);
    mge_graph_free(g);
}

/* Borrowed data points into an aligned buffer; a misaligned one is copied. */
static void test_borrow(void)
{
    mge_graph *g;
    mge_buf b;
    if (!small_model_bytes(0, &g, &b))
        return;
    unsigned char *al = mge_aligned_alloc(b.n + 64);
    memcpy(al, b.p, b.n);
    mge_graph *r = NULL;
    CHECK_OK(mge_file_read(al, b.n, 1, &r, &err), err);
    int borrowed = 0, with_data = 0;
    if (r)
        for (int v = 0; v < r->nvalues; v++) {
            const mge_tensor *t = r->values[v].data;
            if (!t)
                continue;
            with_data++;
            CHECK(((uintptr_t)t->data & 63) == 0);
            if (!(t->flags & MGE_TENSOR_OWNED)) {
                borrowed++;
                CHECK((unsigned char *)t->data >= al && (unsigned char *)t->data + t->nbytes <= al + b.n);
            }
        }
    CHECK(with_data == 10 && borrowed == with_data);
    mge_graph_free(r);
    r = NULL;
    memmove(al + 8, al, b.n); /* misaligned: copies */
    CHECK_OK(mge_file_read(al + 8, b.n, 1, &r, &err), err);
    if (r)
        for (int v = 0; v < r->nvalues; v++)
            if (r->values[v].data)
                CHECK(r->values[v].data->flags & MGE_TENSOR_OWNED);
    mge_graph_free(r);
    mge_aligned_free(al);
    mge_buf_free(&b);
    mge_graph_free(g);
}

static int write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    int ok = fwrite(p, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

static void test_model_load(void)
{
    mge_graph *g;
    mge_buf b;
    if (!small_model_bytes(0, &g, &b))
        return;
    char dir[] = "/tmp/mge-test-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[256], fifo[256], txt[256];
    snprintf(path, sizeof path, "%s/m.mge", dir);
    snprintf(fifo, sizeof fifo, "%s/pipe", dir);
    snprintf(txt, sizeof txt, "%s/m.mgt", dir);
    CHECK(write_file(path, b.p, b.n));

    /* a regular file: mapped, weights borrowed from the mapping */
    mge_graph *r = NULL;
    CHECK_OK(mge_model_load(path, &r, &err), err);
    if (r) {
        CHECK(r->mapping != NULL && r->mapping->n == b.n);
        int borrowed = 0;
        for (int v = 0; v < r->nvalues; v++) {
            const mge_tensor *t = r->values[v].data;
            if (t && !(t->flags & MGE_TENSOR_OWNED)) {
                borrowed++;
                CHECK((char *)t->data >= (char *)r->mapping->p &&
                      (char *)t->data + t->nbytes <= (char *)r->mapping->p + r->mapping->n);
            }
        }
        CHECK(borrowed > 0);
        same_graph(g, r, 0);
        /* borrowed weights may be updated in place; the file does not change */
        int w = mge_graph_find(r, "fc.weight");
        CHECK(w >= 0 && !(r->values[w].data->flags & MGE_TENSOR_OWNED));
        if (w >= 0)
            memset(r->values[w].data->data, 0x7f, r->values[w].data->nbytes);
    }
    mge_graph_free(r); /* unmaps */
    r = NULL;
    CHECK_OK(mge_model_load(path, &r, &err), err);
    if (r)
        same_graph(g, r, 0);
    mge_graph_free(r);

    /* a pipe: read into memory, weights owned */
    CHECK(mkfifo(fifo, 0600) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        int ok = write_file(fifo, b.p, b.n);
        _exit(ok ? 0 : 1);
    }
    r = NULL;
    CHECK_OK(mge_model_load(fifo, &r, &err), err);
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    if (r) {
        CHECK(r->mapping == NULL);
        for (int v = 0; v < r->nvalues; v++)
            if (r->values[v].data)
                CHECK(r->values[v].data->flags & MGE_TENSOR_OWNED);
        same_graph(g, r, 0);
    }
    mge_graph_free(r);

    /* "-": standard input is read into memory even when it is a regular file */
    int fd = open(path, O_RDONLY), saved = dup(0);
    CHECK(fd >= 0 && saved >= 0 && dup2(fd, 0) == 0);
    r = NULL;
    CHECK_OK(mge_model_load("-", &r, &err), err);
    CHECK(dup2(saved, 0) == 0);
    close(fd);
    close(saved);
    if (r) {
        CHECK(r->mapping == NULL);
        same_graph(g, r, 0);
    }
    mge_graph_free(r);

    /* from memory */
    r = NULL;
    CHECK_OK(mge_model_load_mem(b.p, b.n, NULL, &r, &err), err);
    if (r)
        same_graph(g, r, 0);
    mge_graph_free(r);

    /* slurp of a regular file maps it, of an empty one does not */
    void *buf;
    size_t n;
    int mapped;
    CHECK_OK(mge_file_slurp(path, &buf, &n, &mapped, &err), err);
    CHECK(mapped == 1 && n == b.n && memcmp(buf, b.p, n) == 0);
    mge_file_unslurp(buf, n, mapped);
    CHECK(write_file(txt, "", 0));
    CHECK_OK(mge_file_slurp(txt, &buf, &n, &mapped, &err), err);
    CHECK(mapped == 0 && n == 0);
    mge_file_unslurp(buf, n, mapped);

    /* errors */
    char missing[300];
    snprintf(missing, sizeof missing, "%s/nope.mge", dir);
    r = NULL;
    CHECK(mge_model_load(missing, &r, &err) == MGE_ERR_IO && !r && strstr(err.msg, "No such file"));
    CHECK(mge_model_load(dir, &r, &err) == MGE_ERR_IO && !r);
    CHECK(mge_model_load_mem("\x93NUMPY\x01\x00", 8, NULL, &r, &err) == MGE_ERR_FORMAT && strstr(err.msg, "NPY"));
    CHECK(write_file(path, b.p, b.n / 2));
    CHECK(mge_model_load(path, &r, &err) == MGE_ERR_FORMAT && !r && strstr(err.msg, "truncated"));

    /* text by content, whatever the name */
    const char *src = "input x : f32[N,4]\ny = relu(x)\noutput y\n";
    CHECK(write_file(path, src, strlen(src)));
    r = NULL;
    CHECK_OK(mge_model_load(path, &r, &err), err);
    if (r) {
        CHECK(r->mapping == NULL && r->nnodes == 1 && r->noutputs == 1);
        CHECK(mge_graph_find(r, "y") >= 0);
    }
    mge_graph_free(r);

    unlink(path);
    unlink(fifo);
    unlink(txt);
    rmdir(dir);
    mge_buf_free(&b);
    mge_graph_free(g);
}

/* The writer refuses what it cannot store faithfully. */
static void test_write_errors(void)
{
    mge_graph *g = mge_graph_new();
    int64_t d[2] = {3, 4}, e2[2] = {4, 3};
    int v = mge_graph_add_value(g, "w", MGE_VAL_PARAM, MGE_F32, 2, d, &err);
    g->values[v].data = calloc(1, sizeof(mge_tensor));
    CHECK_OK(mge_tensor_alloc(g->values[v].data, MGE_F32, 2, e2, &err), err);
    mge_buf b = {0};
    mge_write_opts o = {0, 0};
    CHECK(mge_file_write(g, &o, &b, &err) != MGE_OK && b.n == 0);
    mge_buf_free(&b);
    mge_graph_free(g);
}

/* Seeds for tests/fuzz/seeds/mge when MGE_FUZZ_SEEDS names a directory. */
static void write_seeds(void)
{
    const char *dir = getenv("MGE_FUZZ_SEEDS");
    if (!dir)
        return;
    mge_graph *g = small_model();
    mge_graph *e = mge_graph_new();
    char path[512];
    mge_buf b;
    if (g && write_graph(g, 0, 0, &b)) {
        snprintf(path, sizeof path, "%s/small.mge", dir);
        CHECK(write_file(path, b.p, b.n));
        mge_buf_free(&b);
    }
    if (g && write_graph(g, 1, 0, &b)) {
        snprintf(path, sizeof path, "%s/small-zlib.mge", dir);
        CHECK(write_file(path, b.p, b.n));
        mge_buf_free(&b);
    }
    mge_graph *a = all_ops();
    if (a && write_graph(a, 0, 0, &b)) {
        snprintf(path, sizeof path, "%s/all-ops.mge", dir);
        CHECK(write_file(path, b.p, b.n));
        mge_buf_free(&b);
    }
    mge_graph_free(a);
    mge_graph *sp = spatial_model();
    if (sp && write_graph(sp, 0, 0, &b)) {
        snprintf(path, sizeof path, "%s/spatial.mge", dir);
        CHECK(write_file(path, b.p, b.n));
        mge_buf_free(&b);
    }
    mge_graph_free(sp);
    if (e && write_graph(e, 0, 0, &b)) {
        snprintf(path, sizeof path, "%s/empty.mge", dir);
        CHECK(write_file(path, b.p, b.n));
        mge_buf_free(&b);
    }
    mge_graph_free(g);
    mge_graph_free(e);
}

/* Consts whose values shape a node at plan time (range's bounds, reshape's
 * shape) are bound before the nodes are rebuilt, so such a model reloads. */
static void test_const_shaped_nodes(void)
{
    mge_graph *g = ug_parse("input x : f32[N,4]\n"
                            "const zero : i64[] = [0]\n"
                            "const lim : i64[] = [4]\n"
                            "const one : i64[] = [1]\n"
                            "const sh : i64[3] = [-1, 2, 2]\n"
                            "r = range(zero, lim, one)\n"
                            "rf = cast(r, dtype=f32)\n"
                            "y = add(x, rf)\n"
                            "z = reshape(y, sh)\n"
                            "output z\n");
    if (!g)
        return;
    mge_buf b;
    if (write_graph(g, 0, 0, &b)) {
        mge_graph *g2 = NULL;
        CHECK_OK(read_copy(b.p, b.n, &g2, &err), err);
        if (g2) {
            same_graph(g, g2, 1);
            int r = mge_graph_find(g2, "r"), z = mge_graph_find(g2, "z");
            CHECK(r >= 0 && g2->values[r].ndim == 1 && g2->values[r].dims[0] == 4);
            CHECK(z >= 0 && g2->values[z].ndim == 3 && g2->values[z].dims[1] == 2 && g2->values[z].dims[2] == 2);
        }
        mge_graph_free(g2);
        mge_buf_free(&b);
    }
    mge_graph_free(g);
}

int main(void)
{
    RUN(test_lenet_roundtrip);
    RUN(test_small_roundtrip);
    RUN(test_all_ops_roundtrip);
    RUN(test_enum_roundtrip);
    RUN(test_truncation);
    RUN(test_byte_flips);
    RUN(test_version_and_signature);
    RUN(test_hostile_edits);
    RUN(test_directory_edits);
    RUN(test_zlib_bomb_claim);
    RUN(test_zlib_total_claim);
    RUN(test_zlib_writer_stays_readable);
    RUN(test_no_state);
    RUN(test_borrow);
    RUN(test_model_load);
    RUN(test_write_errors);
    RUN(test_const_shaped_nodes);
    RUN(write_seeds);
    return unit_done();
}
