/* test_text.c — the text form: parsing, canonical printing, round trips,
 * positioned errors and `weights` binding. */
#include "mge.h"
#include "unit.h"

#include <math.h>
#include <stdint.h>
#include <unistd.h>

static const char *lenet =
    "# lenet.mgt\n"
    "input  x     : f32[N,1,28,28]\n"
    "input  label : i32[N]\n"
    "conv1 = conv2d(x, out=32, kernel=3, pad=1)     # creates conv1.weight, conv1.bias\n"
    "relu1 = relu(conv1)\n"
    "pool1 = maxpool2d(relu1, kernel=2)\n"
    "conv2 = conv2d(pool1, out=64, kernel=3, pad=1)\n"
    "relu2 = relu(conv2)\n"
    "pool2 = maxpool2d(relu2, kernel=2)\n"
    "flat  = flatten(pool2)\n"
    "fc1   = linear(flat, out=128)\n"
    "act1  = relu(fc1)\n"
    "fc2   = linear(act1, out=10)\n"
    "loss  = cross_entropy(fc2, label)\n"
    "output fc2\n"
    "minimize loss\n";

/* A residual block with a downsample branch, as torchvision writes it. */
static const char *resblock =
    "input x : f32[N,16,8,8]\n"
    "layer2.0.conv1 = conv2d(x, out=32, kernel=3, stride=2, pad=1, bias=false)\n"
    "layer2.0.bn1 = batchnorm(layer2.0.conv1)\n"
    "layer2.0.relu = relu(layer2.0.bn1)\n"
    "layer2.0.conv2 = conv2d(layer2.0.relu, out=32, kernel=3, pad=1, bias=false)\n"
    "layer2.0.bn2 = batchnorm(layer2.0.conv2, eps=0.001, momentum=0.01)\n"
    "layer2.0.downsample.0 = conv2d(x, out=32, kernel=1, stride=2, bias=false)\n"
    "layer2.0.downsample.1 = batchnorm(layer2.0.downsample.0)\n"
    "add = add(layer2.0.bn2, layer2.0.downsample.1)\n"
    "relu = relu(add)\n"
    "pool = global_avgpool(relu)\n"
    "flat = flatten(pool)\n"
    "fc = linear(flat, out=5)\n"
    "output fc\n";

/* Depthwise separable layers as in MobileNet: groups = channels, list attributes. */
static const char *mobile =
    "input x : f32[N,8,16,16]\n"
    "dw = conv2d(x, out=8, kernel=[3, 3], stride=[2, 2], pad=[1, 1], groups=8, bias=false)\n"
    "dw.bn = batchnorm(dw)\n"
    "dw.act = relu6(dw.bn)\n"
    "pw = conv2d(dw.act, out=16, kernel=1, bias=false)\n"
    "pw.bn = batchnorm(pw)\n"
    "pw.act = hswish(pw.bn)\n"
    "se = conv2d(pw.act, out=16, kernel=[1, 3], pad=[0, 1], dilation=[1, 1])\n"
    "gate = hsigmoid(se)\n"
    "y = mul(pw.act, gate)\n"
    "output y\n";

/* Every op, with non-default attributes where the op has any. */
static const char *allops =
    "meta producer = \"test \\\"suite\\\" \\\\ x\\n\\ttab\"\n"
    "meta version = 3\n"
    "meta \"odd key\" = -1.5e-3\n"
    "input x : f32[N,4,8,8]\n"
    "input v : f32[N,6]\n"
    "input lab : i64[N]\n"
    "c = conv2d(x, out=4, kernel=3, stride=1, pad=1, dilation=1, groups=2, bias=true)\n"
    "bn = batchnorm(c, eps=1e-3, momentum=0.2)\n"
    "r = relu(bn)\n"
    "r6 = relu6(r)\n"
    "lr = leaky_relu(r6, alpha=0.2)\n"
    "sg = sigmoid(lr)\n"
    "th = tanh(sg)\n"
    "ge = gelu(th)\n"
    "si = silu(ge)\n"
    "hs = hswish(si)\n"
    "hg = hsigmoid(hs)\n"
    "ex = exp(hg)\n"
    "lg = log(ex)\n"
    "sq = sqrt(ex)\n"
    "ng = neg(sq)\n"
    "ab = abs(ng)\n"
    "dr = dropout(ab, p=0.25)\n"
    "cs = cast(dr, dtype=f16)\n"
    "cb = cast(cs, dtype=f32)\n"
    "s1 = sub(cb, lg)\n"
    "m1 = mul(s1, cb)\n"
    "d1 = div(m1, ex)\n"
    "p1 = pow(d1, ex)\n"
    "mx = maximum(p1, d1)\n"
    "mn = minimum(mx, d1)\n"
    "mp = maxpool2d(mn, kernel=3, stride=2, pad=1, dilation=1, ceil_mode=true)\n"
    "ap = avgpool2d(mn, kernel=2, stride=[2, 2], pad=0, ceil_mode=false, count_include_pad=false)\n"
    "gp = global_avgpool(ap)\n"
    "sm = softmax(mp, axis=1)\n"
    "ls = log_softmax(mp, axis=-2)\n"
    "su = sum(sm, axis=[2, 3], keepdim=true)\n"
    "me = mean(ls, axis=1)\n"
    "ma = max(ls)\n"
    "am = argmax(v, axis=0, keepdim=true)\n"
    "rs = reshape(ap, shape=[0, -1])\n"
    "fl = flatten(mp, start=2)\n"
    "tr = transpose(mp, perm=[0, 2, 3, 1])\n"
    "cc = concat(mp, mp, mp, axis=1)\n"
    "sl = slice(cc, axis=1, start=1, end=7, step=2)\n"
    "l1 = linear(v, out=3, bias=false)\n"
    "mm = matmul(v, v, transpose_b=true)\n"
    "mm2 = matmul(mm, v, transpose_a=true)\n"
    "ln = layernorm(l1, axis=-1, eps=1e-6)\n"
    "ce = cross_entropy(l1, lab)\n"
    "ms = mse(ln, l1)\n"
    "param fw : f32[4,4,3,3] init=uniform(0.1)\n"
    "param fb : f32[4] init=zeros\n"
    "param fs : f32[4,1,1] init=ones\n"
    "fc = fused_conv2d(x, fw, fb, x, out=4, kernel=3, pad=1, residual=true, act=leaky_relu, alpha=0.1)\n"
    "fn = fused_conv2d(x, fw, out=4, kernel=3, pad=1, bias=false)\n"
    "fe = fused_elemwise(fc, fs, fn, ops=[relu, mul, add, hswish])\n"
    "fli = fused_linear(v, l1.weight, out=3, act=gelu, bias=false)\n"
    "output ln, sl, tr, fl, rs, gp, su, me, ma, am, mm2, fe, fli\n"
    "output ce\n"
    "minimize ms\n";

/* Consts of every dtype, special floats, inits, quantized data, unused values. */
static const char *consts =
    "input x : f32[N,3]\n"
    "const k : f32[3] = [0.1, -0, 1e-45]\n"
    "const big : f32[2,10] = [1,2,3,4,5,6,7,8,9,10, 11,12,13,14,15,16,17,18,19,3.4028235e38]\n"
    "const special : f32[3] = [inf, -inf, nan]\n"
    "const h : f16[2] = [0.333, 65504]\n"
    "const bh : bf16[1] = [3.14159]\n"
    "const i8v : i8[2] = [-128, 127]\n"
    "const u8v : u8[2] = [0, 255]\n"
    "const i32v : i32[2] = [-2147483648, 2147483647]\n"
    "const i64v : i64[2] = [-9223372036854775808, 9223372036854775807]\n"
    "const b : bool[3] = [true, false, 1]\n"
    "const s : f32[] = 2.5\n"
    "const e : f32[0] = []\n"
    "const q : qs8[2,2] = [1, -2, 3, -4] scale=[0.5, 0.25] axis=0 zero=3\n"
    "const q32 : qs32[1] = [100] scale=0.125\n"
    "y = add(x, k)\n"
    "z = mul(y, s)\n"
    "param unused : f32[2] init=normal(0.02)\n"
    "state st : f32[2] init=\"custom spec\"\n"
    "param noinit : f32[4]\n"
    "output z\n";

static mge_graph *parse(const char *src)
{
    mge_graph *g = NULL;
    mge_error e;
    mge_error_clear(&e);
    mge_status s = mge_text_parse(src, strlen(src), NULL, &g, &e);
    CHECK_MSG(s == MGE_OK, "%d:%d: %s", e.line, e.col, e.msg);
    return s ? NULL : g;
}

/* Printed text as a malloc'd string (NULL on failure). */
static char *print(const mge_graph *g)
{
    mge_buf b = {0};
    mge_error e;
    if (!g)
        return NULL;
    if (mge_text_print(g, &b, &e)) {
        CHECK_MSG(0, "print: %s", e.msg);
        mge_buf_free(&b);
        return NULL;
    }
    return b.p;
}

/* Same values (by name: kind, dtype, shape, init, data), nodes, outputs, loss, meta. */
static int same_graph(const mge_graph *a, const mge_graph *b)
{
    if (a->nvalues != b->nvalues || a->nnodes != b->nnodes || a->ninputs != b->ninputs ||
        a->noutputs != b->noutputs || a->nmeta != b->nmeta)
        return 0;
    for (int i = 0; i < a->nvalues; i++) {
        const mge_value *va = &a->values[i];
        int j = mge_graph_find(b, va->name);
        if (j < 0)
            return 0;
        const mge_value *vb = &b->values[j];
        if (va->kind != vb->kind || va->dtype != vb->dtype || va->ndim != vb->ndim ||
            memcmp(va->dims, vb->dims, sizeof(int64_t) * (size_t)va->ndim) ||
            (!va->init) != (!vb->init) || (va->init && strcmp(va->init, vb->init)) || (!va->data) != (!vb->data))
            return 0;
        if (va->data) {
            const mge_tensor *ta = va->data, *tb = vb->data;
            if (ta->nbytes != tb->nbytes || memcmp(ta->data, tb->data, ta->nbytes) || ta->q.nscale != tb->q.nscale ||
                ta->q.axis != tb->q.axis || ta->q.zero != tb->q.zero ||
                (ta->q.nscale && memcmp(ta->q.scale, tb->q.scale, sizeof(float) * (size_t)ta->q.nscale)))
                return 0;
        }
    }
    for (int i = 0; i < a->nnodes; i++) {
        const mge_node *na = &a->nodes[i], *nb = &b->nodes[i];
        if (na->op != nb->op || na->nin != nb->nin || na->nout != nb->nout || na->nattr != nb->nattr ||
            strcmp(na->name, nb->name))
            return 0;
        for (int k = 0; k < na->nin; k++)
            if (strcmp(a->values[na->in[k]].name, b->values[nb->in[k]].name))
                return 0;
        for (int k = 0; k < na->nattr; k++) {
            const mge_attr *x = &na->attrs[k], *y = &nb->attrs[k];
            if (x->key != y->key || x->n != y->n || memcmp(x->i, y->i, sizeof x->i) ||
                memcmp(&x->f, &y->f, sizeof x->f))
                return 0;
        }
    }
    for (int i = 0; i < a->ninputs; i++)
        if (strcmp(a->values[a->inputs[i]].name, b->values[b->inputs[i]].name))
            return 0;
    for (int i = 0; i < a->noutputs; i++)
        if (strcmp(a->values[a->outputs[i]].name, b->values[b->outputs[i]].name))
            return 0;
    if ((a->loss < 0) != (b->loss < 0) || (a->loss >= 0 && strcmp(a->values[a->loss].name, b->values[b->loss].name)))
        return 0;
    for (int i = 0; i < a->nmeta; i++)
        if (strcmp(a->meta[i].key, b->meta[i].key) || strcmp(a->meta[i].value, b->meta[i].value))
            return 0;
    return 1;
}

/* parse -> print -> parse -> print: identical text and the same graph. */
static void roundtrip(const char *src, const char *label)
{
    mge_graph *g1 = parse(src);
    char *t1 = print(g1);
    mge_graph *g2 = t1 ? parse(t1) : NULL;
    char *t2 = print(g2);
    CHECK_MSG(t1 && t2 && strcmp(t1, t2) == 0, "%s: printed text changed:\n%s\n----\n%s", label, t1 ? t1 : "",
              t2 ? t2 : "");
    CHECK_MSG(g1 && g2 && same_graph(g1, g2), "%s: reparsed graph differs", label);
    free(t1);
    free(t2);
    mge_graph_free(g1);
    mge_graph_free(g2);
}

static const mge_value *val(const mge_graph *g, const char *name)
{
    int v = mge_graph_find(g, name);
    return v < 0 ? NULL : &g->values[v];
}

static int shape_is(const mge_value *v, mge_dtype dt, int nd, const int64_t *d)
{
    if (!v || v->dtype != dt || v->ndim != nd)
        return 0;
    for (int i = 0; i < nd; i++)
        if (v->dims[i] != d[i])
            return 0;
    return 1;
}

static void test_lenet(void)
{
    mge_graph *g = parse(lenet);
    if (!g)
        return;
    CHECK(shape_is(val(g, "fc2"), MGE_F32, 2, (int64_t[]){MGE_DIM_N, 10}));
    CHECK(shape_is(val(g, "flat"), MGE_F32, 2, (int64_t[]){MGE_DIM_N, 3136}));
    static const struct {
        const char *name;
        int nd;
        int64_t d[4];
    } want[] = {{"conv1.weight", 4, {32, 1, 3, 3}}, {"conv1.bias", 1, {32}},     {"conv2.weight", 4, {64, 32, 3, 3}},
                {"conv2.bias", 1, {64}},            {"fc1.weight", 2, {128, 3136}}, {"fc1.bias", 1, {128}},
                {"fc2.weight", 2, {10, 128}},       {"fc2.bias", 1, {10}}};
    int nparams = 0;
    for (int v = 0; v < g->nvalues; v++)
        nparams += g->values[v].kind == MGE_VAL_PARAM;
    CHECK(nparams == 8);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const mge_value *v = val(g, want[i].name);
        CHECK_MSG(v && v->kind == MGE_VAL_PARAM && shape_is(v, MGE_F32, want[i].nd, want[i].d) && v->init,
                  "%s", want[i].name);
    }
    CHECK(g->ninputs == 2 && strcmp(g->values[g->inputs[0]].name, "x") == 0 &&
          strcmp(g->values[g->inputs[1]].name, "label") == 0);
    CHECK(g->noutputs == 1 && strcmp(g->values[g->outputs[0]].name, "fc2") == 0);
    CHECK(g->loss >= 0 && strcmp(g->values[g->loss].name, "loss") == 0);
    CHECK(g->nnodes == 11);
    const mge_node *c1 = &g->nodes[0];
    CHECK(c1->op == MGE_OP_CONV2D && c1->nin == 3 && mge_node_int(c1, MGE_KEY_out, 0) == 32 &&
          mge_node_ints(c1, MGE_KEY_kernel, 1, 0) == 3 && mge_node_ints(c1, MGE_KEY_pad, 0, 0) == 1);
    mge_graph_free(g);
}

/* The explicit form, written differently (params first, other spacing,
 * comments, a wrapped argument list), prints the same as the implicit one. */
static void test_explicit_equals_implicit(void)
{
    mge_graph *g = parse(lenet);
    char *t1 = print(g);
    if (!g || !t1)
        return;
    const char *p[] = {"conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias",
                       "fc1.weight",   "fc1.bias",   "fc2.weight",   "fc2.bias"};
    char init[8][96];
    for (int i = 0; i < 8; i++) {
        const mge_value *v = val(g, p[i]);
        snprintf(init[i], sizeof init[i], "%s", v && v->init ? v->init : "zeros");
    }
    char src[4096];
    snprintf(src, sizeof src,
             "input x:f32[ N , 1 , 28 , 28 ]   # explicit form\n"
             "\n"
             "param conv1.weight : f32[32,1,3,3] init=%s\n"
             "param conv1.bias : f32[32] init=%s\n"
             "param conv2.weight : f32[64,32,3,3] init=%s\n"
             "param conv2.bias : f32[64] init=%s\n"
             "input label : i32[N]\n"
             "param fc1.weight : f32[128,3136] init=%s\n"
             "param fc1.bias : f32[128] init=%s\n"
             "param fc2.weight : f32[10,128] init=%s\n"
             "param fc2.bias : f32[10] init=%s\n"
             "conv1 = conv2d(x, conv1.weight, conv1.bias,\n"
             "               out=32, kernel=3, stride=1, pad=1)   # stride is the default\n"
             "relu1 = relu(conv1)\n"
             "pool1 = maxpool2d(relu1, kernel=2)\n"
             "conv2 = conv2d(pool1, conv2.weight, conv2.bias, out=64, kernel=3, pad=1, bias=true)\n"
             "relu2 = relu(conv2)\n"
             "pool2 = maxpool2d(relu2, kernel=2)\n"
             "flat = flatten(pool2, start=1)\n"
             "fc1 = linear(flat, fc1.weight, fc1.bias, out=128)\n"
             "act1 = relu(fc1)\n"
             "fc2 = linear(act1, fc2.weight, fc2.bias, out=10)\n"
             "loss = cross_entropy(fc2, label)\n"
             "output fc2\n"
             "minimize loss",
             init[0], init[1], init[2], init[3], init[4], init[5], init[6], init[7]);
    mge_graph *g2 = parse(src);
    char *t2 = print(g2);
    CHECK_MSG(t2 && strcmp(t1, t2) == 0, "explicit:\n%s\nimplicit:\n%s", t2 ? t2 : "", t1);
    /* the canonical text writes every input and no default attribute */
    CHECK(strstr(t1, "conv1 = conv2d(x, conv1.weight, conv1.bias, out=32, kernel=3, pad=1)\n") != NULL);
    CHECK(strstr(t1, "flat = flatten(pool2)\n") != NULL);
    CHECK(strstr(t1, "stride=") == NULL);
    free(t1);
    free(t2);
    mge_graph_free(g);
    mge_graph_free(g2);
}

static const char *spatial = "input x : f32[N,2,5,6]\n"
                            "r = resize(x, mode=bilinear, align_corners=true, scales=[2, 0.75])\n"
                            "u = upsample(x, size=[3, 5])\n"
                            "p = pad(r, pads=[1, 2, 0, 1], mode=replicate)\n"
                            "q = pad(u, pads=[-1, 2], mode=constant, value=1.5)\n"
                            "gn = group_norm(p, num_groups=2)\n"
                            "in = instance_norm(q, affine=true)\n"
                            "rn = rms_norm(in, axis=-2)\n"
                            "output gn, rn\n";

static void test_roundtrip_nets(void)
{
    roundtrip(lenet, "lenet");
    roundtrip(resblock, "resblock");
    roundtrip(mobile, "mobile");
    roundtrip(allops, "allops");
    roundtrip(consts, "consts");
    roundtrip("", "empty");
    roundtrip(spatial, "spatial");
}

/* Enum attributes print as their words (defaults left out), float lists
 * as lists; upsample is resize's other spelling; an unknown word lists the
 * allowed ones. */
static void test_enum_syntax(void)
{
    mge_graph *g = parse(spatial);
    char *t = print(g);
    if (!t)
        return;
    CHECK_MSG(strstr(t, "r = resize(x, mode=bilinear, align_corners=true, scales=[2, 0.75])\n"), "%s", t);
    CHECK_MSG(strstr(t, "u = resize(x, size=[3, 5])\n"), "%s", t);
    CHECK_MSG(strstr(t, "p = pad(r, pads=[1, 2, 0, 1], mode=replicate)\n"), "%s", t);
    CHECK_MSG(strstr(t, "q = pad(u, pads=[-1, 2], value=1.5)\n"), "%s", t);
    free(t);
    mge_graph_free(g);
    mge_graph *h = NULL;
    mge_error e;
    const char *bad = "input x : f32[1,1,4,4]\ny = resize(x, mode=Bilinear, scales=[2, 2])\noutput y\n";
    CHECK(mge_text_parse(bad, strlen(bad), NULL, &h, &e) != MGE_OK);
    CHECK_MSG(strstr(e.msg, "resize attribute 'mode': expected one of nearest bilinear constant reflect replicate bicubic, "
                            "found 'Bilinear'") && e.line == 2,
              "%d: %s", e.line, e.msg);
    bad = "input x : f32[1,1,4,4]\ny = resize(x, scales=[2, two])\noutput y\n";
    CHECK(mge_text_parse(bad, strlen(bad), NULL, &h, &e) != MGE_OK);
    CHECK_MSG(strstr(e.msg, "resize attribute 'scales': expected a number, found"), "%s", e.msg);
    mge_graph_free(h);
}

/* Non-default attributes survive printing, with their types. */
static void test_attrs_printed(void)
{
    mge_graph *g = parse(allops);
    char *t = print(g);
    if (!t)
        return;
    const char *want[] = {
        "c = conv2d(x, c.weight, c.bias, out=4, kernel=3, pad=1, groups=2)\n",
        "bn = batchnorm(c, bn.weight, bn.bias, bn.running_mean, bn.running_var", "eps=0.001, momentum=0.2)\n",
        "lr = leaky_relu(r6, alpha=0.2)\n",
        "dr = dropout(ab, p=0.25)\n",
        "cs = cast(dr, dtype=f16)\n",
        "mp = maxpool2d(mn, kernel=3, stride=2, pad=1, ceil_mode=true)\n",
        "ap = avgpool2d(mn, kernel=2, stride=[2, 2], count_include_pad=false)\n",
        "sm = softmax(mp, axis=1)\n",
        "ls = log_softmax(mp, axis=-2)\n",
        "su = sum(sm, axis=[2, 3], keepdim=true)\n",
        "me = mean(ls, axis=1)\n",
        "ma = max(ls)\n",
        "am = argmax(v, axis=0, keepdim=true)\n",
        "rs = reshape(ap, shape=[0, -1])\n",
        "fl = flatten(mp, start=2)\n",
        "tr = transpose(mp, perm=[0, 2, 3, 1])\n",
        "cc = concat(mp, mp, mp, axis=1)\n",
        "sl = slice(cc, axis=1, start=1, end=7, step=2)\n",
        "l1 = linear(v, l1.weight, out=3, bias=false)\n",
        "mm = matmul(v, v, transpose_b=true)\n",
        "mm2 = matmul(mm, v, transpose_a=true)\n",
        "ln = layernorm(l1, ln.weight, ln.bias, eps=1e-06)\n",
        "meta producer = \"test \\\"suite\\\" \\\\ x\\n\\ttab\"\n",
        "meta version = 3\n",
        "meta \"odd key\" = -1.5e-3\n",
        "output ln, sl, tr, fl, rs, gp, su, me, ma, am, mm2, fe, fli, ce\n",
        "fc = fused_conv2d(x, fw, fb, x, out=4, kernel=3, pad=1, residual=true, act=leaky_relu, alpha=0.1)\n",
        "fn = fused_conv2d(x, fw, out=4, kernel=3, pad=1, bias=false)\n",
        "fe = fused_elemwise(fc, fs, fn, ops=[relu, mul, add, hswish])\n",
        "minimize ms\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        CHECK_MSG(strstr(t, want[i]) != NULL, "missing: %s", want[i]);
    const mge_value *cs = val(g, "cs");
    CHECK(cs && cs->dtype == MGE_F16);
    CHECK(strcmp(mge_graph_get_meta(g, "producer"), "test \"suite\" \\ x\n\ttab") == 0);
    CHECK(strcmp(mge_graph_get_meta(g, "odd key"), "-1.5e-3") == 0);
    free(t);
    mge_graph_free(g);
}

static void test_consts(void)
{
    mge_graph *g = parse(consts);
    char *t = print(g);
    if (!g || !t)
        return;
    const mge_value *k = val(g, "k");
    CHECK(k && k->kind == MGE_VAL_CONST && k->data);
    if (k && k->data) {
        const float *f = k->data->data;
        CHECK(f[0] == 0.1f && f[1] == 0 && signbit(f[1]) && f[2] > 0);
    }
    const mge_value *sp = val(g, "special");
    if (sp && sp->data) {
        const float *f = sp->data->data;
        CHECK(isinf(f[0]) && f[0] > 0 && isinf(f[1]) && f[1] < 0 && isnan(f[2]));
    }
    const mge_value *i64v = val(g, "i64v");
    CHECK(i64v && i64v->data && ((int64_t *)i64v->data->data)[0] == INT64_MIN &&
          ((int64_t *)i64v->data->data)[1] == INT64_MAX);
    const mge_value *q = val(g, "q");
    CHECK(q && q->data && q->data->q.nscale == 2 && q->data->q.axis == 0 && q->data->q.zero == 3 &&
          q->data->q.scale[1] == 0.25f);
    const mge_value *st = val(g, "st");
    CHECK(st && st->kind == MGE_VAL_STATE && strcmp(st->init, "custom spec") == 0);
    CHECK(val(g, "noinit") && !val(g, "noinit")->init);
    CHECK(strstr(t, "const k : f32[3] = [0.1, -0, 1e-45]\n") != NULL);
    CHECK(strstr(t, "const special : f32[3] = [inf, -inf, nan]\n") != NULL);
    CHECK(strstr(t, "const b : bool[3] = [1, 0, 1]\n") != NULL);
    CHECK(strstr(t, "const q : qs8[2,2] = [1, -2, 3, -4] scale=[0.5, 0.25] zero=3 axis=0\n") != NULL);
    CHECK(strstr(t, "state st : f32[2] init=\"custom spec\"\n") != NULL);
    CHECK(strstr(t, "param unused : f32[2] init=normal(0.02)\n") != NULL);
    /* unused values come after the nodes; long lists wrap inside the brackets */
    const char *z = strstr(t, "z = mul("), *u = strstr(t, "param unused");
    CHECK(z && u && u > z);
    CHECK(strstr(t, "const big : f32[2,10] = [\n    1, 2, 3, 4, 5, 6, 7, 8,\n") != NULL);
    free(t);
    mge_graph_free(g);
}

typedef struct errcase {
    const char *src;
    int line, col;
    const char *msg;
} errcase;

static void test_errors(void)
{
    static const errcase cases[] = {
        {"input x : f32[N,4]\ny = rleu(x)\n", 2, 5, "unknown op 'rleu' (did you mean relu"},
        {"input x : f32[N,4]\ny = conv(x)\n", 2, 5, "did you mean conv2d"},
        {"input x : f32[N,4]\ny = relu(x, alpha=1)\n", 2, 13, "relu takes no attributes"},
        {"input x : f32[N,4]\ny = linear(x, out=2, kernal=3)\n", 2, 22, "no attribute 'kernal' (attributes: out, bias, precision)"},
        {"input x : f32[N,4]\ny = linear(x, out=2.5)\n", 2, 19, "expected an integer"},
        {"input x : f32[N,4]\ny = linear(x, out=2, bias=1)\n", 2, 27, "expected true or false"},
        {"input x : f32[N,4]\ny = cast(x, dtype=f31)\n", 2, 19, "expected a dtype"},
        {"input x : f32[N,4]\ny = fused_elemwise(x, ops=[relu, relux])\n", 2, 34, "expected an op name, found 'relux'"},
        {"input x : f32[N,4]\ny = fused_elemwise(x, ops=[none])\n", 2, 28, "expected an op name, found 'none'"},
        {"input x : f32[N,4]\ny = fused_elemwise(x, ops=[])\n", 2, 28, "needs at least one op"},
        {"input x : f32[N,4]\ny = fused_elemwise(x, ops=[relu, add])\n", 2, 1, "1 binary ops take 1 extra inputs"},
        {"input x : f32[N,4]\ny = fused_elemwise(x, ops=cast)\n", 2, 1, "ops entry 0 is cast"},
        {"input x : f32[N,4]\ny = fused_linear(x, x, out=2, bias=false, act=exp)\n", 2, 1, "act=exp: expected none, relu"},
        {"input x : f32[N,4]\ny = fused_linear(x, out=2, act=3)\n", 2, 32, "expected an op name or none"},
        {"input x : f32[N,4]\ny = relu(z)\n", 2, 10, "undefined name 'z'"},
        {"input x : f32[N,4]\ninput x : f32[3]\n", 2, 7, "'x' is already defined (line 1)"},
        {"input x : f32[N,4]\n\nx = relu(x)\n", 3, 1, "'x' is already defined (line 1)"},
        {"input x : f32[N,4]\ny = add(x)\n", 2, 1, "add takes 2 inputs, got 1"},
        {"input x : f32[N,4]\ny = relu(x, x)\n", 2, 13, "too many inputs"},
        {"input x : f31[N,4]\n", 1, 11, "unknown dtype 'f31'"},
        {"input x : f32[N,4\n", 2, 1, "expected ',' or ']'"},
        {"input x : f32[N,4]\ny = relu(x\n", 3, 1, "expected ',' or ')'"},
        {"input x : f32[N,4]\ny = relu(x))\n", 2, 12, "expected end of line, found ')'"},
        {"input x : f32[N,4]\ny = relu x\n", 2, 10, "expected '(' after the op name"},
        {"input x : f32[N,4]\ny = linear(x, out=99999999999999999999)\n", 2, 19, "out of range"},
        {"input x : f32[99999999999999999999]\n", 1, 15, "out of range"},
        {"input x : f32[1000000,1000000,1000000]\n", 1, 11, "too large"},
        {"input x : f32[1,1,1,1,1,1,1,1,1]\n", 1, 31, "more than 8 dimensions"},
        {"param w : f32[N,3]\n", 1, 15, "only inputs may have symbolic dimensions"},
        {"input x : f32[N,4]\ny = conv2d(x, out=8, kernel=3)\n", 2, 1, "y: conv2d: x is f32[1,4]"},
        {"input x : f32[N,4]\ny = linear(x, out=3)\nz = linear(y, out=3)\nw = add(y, z)\noutput q\n", 5, 8,
         "undefined name 'q'"},
        {"input x : f32[N,4]\noutput x, x\n", 2, 11, "already an output"},
        {"input x : f32[N,4]\nminimize x\nminimize x\n", 3, 1, "minimize given twice (first on line 2)"},
        {"const c : f32[3] = [1, 2]\n", 1, 20, "2 values given, the shape holds 3"},
        {"const c : f32[2] = [1, 2, 3]\n", 1, 27, "too many values"},
        {"const c : i8[2] = [1, 200]\n", 1, 23, "out of range"},
        {"const c : i32[1] = [1.5]\n", 1, 21, "expected an integer"},
        {"param w : f32[3] init=gaussian(1)\n", 1, 23, "unknown init 'gaussian'"},
        {"meta k = \"abc\n", 1, 10, "unterminated string"},
        {"meta k = \"a\\qb\"\n", 1, 12, "unknown escape"},
        {"input x : f32[N,4]\ny = relu(x) $\n", 2, 13, "unexpected character '$'"},
        {"input x : f32[N,4]\n\x01\n", 2, 1, "unexpected byte 0x01"},
        {"input x : f32[N,4]\nfoo x\n", 2, 1, "unknown statement 'foo'"},
        {"input x : f32[N,4]\ny = relu(x, 3)\n", 2, 13, "expected an input name or key=value"},
        {"input x : f32[N,4]\ny = linear(x, out=2, x)\n", 2, 22, "inputs must come before attributes"},
        {"input x : f32[N,4]\ny = linear(x, out=2, out=3)\n", 2, 22, "attribute 'out' given twice"},
        {"input x : f32[N,4]\ny = sum(x, axis=[])\n", 2, 18, "needs at least one value"},
        {"input x : f32[N,4]\ny = sum(x, axis=[1,2,3,4,5,6,7,8,9])\n", 2, 34, "more than 8 values"},
        {"input x : f32[N,4]\ny = relu(x)\ny.z = 1x\n", 3, 7, "malformed number"},
        {"input x : f32[N,4]\ny = relu(x)\nweights w.npz\n", 3, 9, "expected a quoted file name"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mge_graph *g = NULL;
        mge_error e;
        mge_error_clear(&e);
        mge_status s = mge_text_parse(cases[i].src, strlen(cases[i].src), NULL, &g, &e);
        CHECK_MSG(s != MGE_OK && g == NULL, "case %zu parsed", i);
        CHECK_MSG(e.line == cases[i].line && e.col == cases[i].col, "case %zu: at %d:%d, want %d:%d (%s)", i,
                  e.line, e.col, cases[i].line, cases[i].col, e.msg);
        CHECK_MSG(strstr(e.msg, cases[i].msg) != NULL, "case %zu: message '%s' lacks '%s'", i, e.msg, cases[i].msg);
        mge_graph_free(g);
    }
}

/* Inputs that once crashed parsers: NUL bytes, endless lines, deep nesting. */
static void test_hostile(void)
{
    mge_graph *g = NULL;
    mge_error e;
    const char nul[] = "input x : f32[N,4]\ny = relu(x)\0z = relu(y)\n";
    CHECK(mge_text_parse(nul, sizeof nul - 1, NULL, &g, &e) != MGE_OK && e.line == 2 && e.col == 12 &&
          strstr(e.msg, "NUL") != NULL);
    size_t n = 1 << 20;
    char *big = malloc(n + 64);
    if (!big)
        return;
    /* a megabyte-long comment, then an error: the column counts every byte */
    big[0] = '#';
    memset(big + 1, 'a', n - 1);
    memcpy(big + n, "\n$", 2);
    CHECK(mge_text_parse(big, n + 2, NULL, &g, &e) != MGE_OK && e.line == 2 && e.col == 1);
    /* deep nesting is just a syntax error */
    memcpy(big, "y = relu(", 9);
    memset(big + 9, '(', n - 9);
    CHECK(mge_text_parse(big, n, NULL, &g, &e) != MGE_OK && e.line == 1 && e.col == 10);
    memset(big, '[', n);
    CHECK(mge_text_parse(big, n, NULL, &g, &e) != MGE_OK && e.line == 1 && e.col == 1);
    /* a long name is fine; a long number literal is refused */
    memcpy(big, "input ", 6);
    memset(big + 6, 'a', n - 6);
    memcpy(big + n, " : f32[1]\n", 10);
    CHECK(mge_text_parse(big, n + 10, NULL, &g, &e) == MGE_OK && g && g->nvalues == 1);
    mge_graph_free(g);
    g = NULL;
    memcpy(big, "const c : f32[1] = [", 20);
    memset(big + 20, '7', 4000);
    CHECK(mge_text_parse(big, 4020, NULL, &g, &e) != MGE_OK && strstr(e.msg, "too long"));
    memcpy(big + 20, "1e99999]", 8);
    CHECK(mge_text_parse(big, 28, NULL, &g, &e) != MGE_OK && strstr(e.msg, "out of range"));
    free(big);
    /* text not NUL-terminated: parse a prefix of a longer buffer */
    const char *two = "input x : f32[2]\ninput y : f32[3]\n";
    CHECK(mge_text_parse(two, 17, NULL, &g, &e) == MGE_OK && g && g->nvalues == 1);
    mge_graph_free(g);
}

/* Keywords are contextual and op names live apart from value names. */
static void test_names(void)
{
    const char *src = "input input : f32[N,2]\n"
                      "output = relu(input)\n"
                      "relu = relu(output)\n"
                      "N = neg(relu)\n"
                      "a = abs(N)\n"
                      "output output, relu, a\n";
    mge_graph *g = parse(src);
    if (!g)
        return;
    CHECK(g->nnodes == 4 && g->noutputs == 3 && val(g, "N") && val(g, "N")->kind == MGE_VAL_NODE);
    mge_graph_free(g);
    roundtrip(src, "names");
}

static void test_weights(void)
{
    char dir[] = "/tmp/mge-text-XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK_MSG(0, "mkdtemp failed");
        return;
    }
    mge_tlist l = {0};
    mge_error e;
    mge_tensor w, b;
    CHECK_OK(mge_tensor_alloc(&w, MGE_F32, 2, (int64_t[]){3, 4}, &e), e);
    CHECK_OK(mge_tensor_alloc(&b, MGE_F32, 1, (int64_t[]){3}, &e), e);
    for (int i = 0; i < 12; i++)
        ((float *)w.data)[i] = (float)i * 0.5f;
    for (int i = 0; i < 3; i++)
        ((float *)b.data)[i] = -1.0f - (float)i;
    CHECK_OK(mge_tlist_add(&l, "fc.weight", &w, &e), e);
    CHECK_OK(mge_tlist_add(&l, "fc.bias", &b, &e), e);
    mge_buf z = {0};
    CHECK_OK(mge_npz_write(&l, &z, &e), e);
    mge_tlist_free(&l);
    char path[256];
    snprintf(path, sizeof path, "%s/w.npz", dir);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(z.p, 1, z.n, f) == z.n);
    if (f)
        fclose(f);
    mge_buf_free(&z);

    /* `weights` may come before the layer it fills; the path is relative to base_dir */
    const char *src = "weights \"w.npz\"\n"
                      "input x : f32[N,4]\n"
                      "fc = linear(x, out=3)\n"
                      "h = linear(fc, out=2)\n"
                      "output h\n";
    mge_graph *g = NULL;
    mge_status s = mge_text_parse(src, strlen(src), dir, &g, &e);
    CHECK_MSG(s == MGE_OK, "%d:%d: %s", e.line, e.col, e.msg);
    if (g) {
        const mge_value *fw = val(g, "fc.weight"), *fb = val(g, "fc.bias"), *hw = val(g, "h.weight");
        CHECK(fw && fw->data && ((float *)fw->data->data)[11] == 5.5f);
        CHECK(fb && fb->data && ((float *)fb->data->data)[2] == -3.0f);
        CHECK(hw && !hw->data); /* partial binding: h keeps its init */
        mge_graph_free(g);
        g = NULL;
    }
    /* a missing file and a shape mismatch are errors at the statement */
    const char *missing = "input x : f32[N,4]\n  weights \"nope.npz\"\n";
    CHECK(mge_text_parse(missing, strlen(missing), dir, &g, &e) != MGE_OK && e.line == 2 && e.col == 3 &&
          strstr(e.msg, "nope.npz"));
    const char *wrong = "input x : f32[N,5]\nfc = linear(x, out=3)\nweights \"w.npz\"\n";
    CHECK(mge_text_parse(wrong, strlen(wrong), dir, &g, &e) != MGE_OK && e.line == 3 && e.col == 1 &&
          strstr(e.msg, "fc.weight"));
    CHECK(g == NULL);
    unlink(path);
    rmdir(dir);
}

/* Graphs the printer must refuse rather than write unreadable text. */
static void test_print_refuses(void)
{
    mge_graph *g = mge_graph_new();
    mge_error e;
    CHECK(mge_graph_add_value(g, "0abc", MGE_VAL_INPUT, MGE_F32, 0, NULL, &e) >= 0);
    mge_buf b = {0};
    CHECK(mge_text_print(g, &b, &e) != MGE_OK && strstr(e.msg, "0abc"));
    mge_buf_free(&b);
    mge_graph_free(g);
    g = mge_graph_new();
    CHECK(mge_graph_add_value(g, "c", MGE_VAL_CONST, MGE_F32, 1, (int64_t[]){2}, &e) >= 0);
    CHECK(mge_text_print(g, &b, &e) != MGE_OK && strstr(e.msg, "no data"));
    mge_buf_free(&b);
    mge_graph_free(g);
}

int main(void)
{
    RUN(test_lenet);
    RUN(test_explicit_equals_implicit);
    RUN(test_roundtrip_nets);
    RUN(test_enum_syntax);
    RUN(test_attrs_printed);
    RUN(test_consts);
    RUN(test_errors);
    RUN(test_hostile);
    RUN(test_names);
    RUN(test_weights);
    RUN(test_print_refuses);
    return unit_done();
}
