/* test_pass_fuse_elemwise.c — the fuse-elemwise pass and the fused_elemwise
 * kernels: the graph change on small text models (which chains fuse, what
 * breaks a chain, no-ops), the numbers before and after through the
 * executor, and the cpu kernel against the ref kernel for every op kind,
 * broadcast shape, odd sizes, in place, and 1, 2 and 3 threads. */
#include "internal.h"
#include "unit.h"
#include "unit_graph.h"

#include <stdint.h>

static mge_rng rng;
static mge_pool *pools[3];   /* NULL (serial), 2 and 3 threads */

/* ---------------------------------------------------------------- graphs */

static mge_graph *parse(const char *src)
{
    mge_graph *g = ug_parse(src);
    mge_error err;
    mge_error_clear(&err);
    if (g)
        CHECK_OK(mge_graph_init_params(g, 3, &err), err);
    return g;
}

/* Node n is fused_elemwise with ops (names, comma-separated) on inputs (value names). */
static int is_fused(const mge_graph *g, const mge_node *n, const char *ops, const char *ins)
{
    if (!n || n->op != MGE_OP_FUSED_ELEMWISE)
        return 0;
    const mge_attr *a = mge_node_attr(n, MGE_KEY_ops);
    char buf[256] = "";
    for (int k = 0; a && k < a->n; k++)
        snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s", k ? "," : "", mge_attr_op_name(a->i[k]));
    if (strcmp(buf, ops) != 0) {
        fprintf(stderr, "ops: %s, expected %s\n", buf, ops);
        return 0;
    }
    buf[0] = 0;
    for (int k = 0; k < n->nin; k++)
        snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s", k ? "," : "", g->values[n->in[k]].name);
    if (strcmp(buf, ins) != 0) {
        fprintf(stderr, "inputs: %s, expected %s\n", buf, ins);
        return 0;
    }
    return 1;
}

/* Runs fuse-elemwise over *g and checks the numbers: the fused model on
 * cpu gives the unfused model's cpu numbers bit for bit (the fused kernel
 * rounds every step to f32 with the same formulas), at 1 and 2 threads,
 * and the ref backend agrees closely. Returns *changed. */
static int apply(mge_graph **g, int64_t batch, float lo, float hi)
{
    mge_error err;
    mge_error_clear(&err);
    ug_outs before = {0}, after = {0}, after2 = {0}, after_ref = {0};
    ug_fill f = {0, lo, hi, 0};
    ug_run(*g, "cpu", 1, batch, f, &before);
    int changed = -1;
    CHECK_OK(mge_passes_run_list(g, "fuse-elemwise", &changed, &err), err);
    CHECK_OK(mge_graph_validate(*g, &err), err);
    ug_run(*g, "cpu", 1, batch, f, &after);
    ug_run(*g, "cpu", 2, batch, f, &after2);
    ug_run(*g, "ref", 1, batch, f, &after_ref);
    ug_check_close(&before, &after, 0);
    ug_check_close(&before, &after2, 0);
    ug_check_close(&before, &after_ref, 1e-5);
    ug_outs_free(&before);
    ug_outs_free(&after);
    ug_outs_free(&after2);
    ug_outs_free(&after_ref);
    return changed;
}

/* The pass changes nothing: *changed = 0, the same graph and file bytes. */
static void check_noop(const char *src)
{
    mge_graph *g = parse(src);
    if (g)
        ug_check_noop(g, "fuse-elemwise", src);
}

/* ---------------------------------------------------------------- the pass */

static void test_chain(void)
{
    mge_graph *g = parse("input x : f32[N,3,4,5]\n"
                         "input y : f32[N,3,4,5]\n"
                         "const two : f32[] = [2]\n"
                         "param b : f32[3,1,1] init=uniform(1)\n"
                         "m = mul(x, two)\n"
                         "a = add(b, m)\n"     /* the chain value on the right of a commuting op */
                         "s = sigmoid(a)\n"
                         "out = mul(s, y)\n"
                         "output out\n");
    if (!g)
        return;
    CHECK(apply(&g, 2, -3, 3) == 1);
    CHECK(g->nnodes == 1);
    CHECK(is_fused(g, ug_producer(g, "out"), "mul,add,sigmoid,mul", "x,two,b,y"));
    CHECK(g->nnodes == 1 && strcmp(g->nodes[0].name, "out") == 0);
    CHECK(g->noutputs == 1 && strcmp(g->values[g->outputs[0]].name, "out") == 0);
    CHECK(mge_graph_find(g, "m") < 0 && mge_graph_find(g, "a") < 0 && mge_graph_find(g, "s") < 0);
    /* the text form and the .mge file carry the node */
    mge_error err;
    mge_error_clear(&err);
    mge_buf t = {0};
    CHECK_OK(mge_text_print(g, &t, &err), err);
    CHECK(t.p && strstr(t.p, "out = fused_elemwise(x, two, b, y, ops=[mul, add, sigmoid, mul])"));
    mge_graph *back = NULL;
    if (t.p)
        CHECK_OK(mge_text_parse(t.p, t.n, ".", &back, &err), err);
    CHECK(back && is_fused(back, ug_producer(back, "out"), "mul,add,sigmoid,mul", "x,two,b,y"));
    mge_graph_free(back);
    mge_buf_free(&t);
    mge_buf f;
    ug_file_bytes(g, &f);
    back = NULL;
    if (f.p)
        CHECK_OK(mge_file_read(f.p, f.n, 0, &back, &err), err);
    CHECK(back && is_fused(back, ug_producer(back, "out"), "mul,add,sigmoid,mul", "x,two,b,y"));
    mge_graph_free(back);
    mge_buf_free(&f);
    /* nothing left to fuse: a second run is a no-op */
    int changed = -1;
    mge_graph *before = g;
    CHECK_OK(mge_passes_run_list(&g, "fuse-elemwise", &changed, &err), err);
    CHECK(changed == 0 && g == before);
    mge_graph_free(g);
}

static void test_unary_pair(void)
{
    mge_graph *g = parse("input x : f32[N,7]\n"
                         "r = relu(x)\n"
                         "n = neg(r)\n"
                         "output n\n");
    if (!g)
        return;
    CHECK(apply(&g, 3, -2, 2) == 1);
    CHECK(g->nnodes == 1 && is_fused(g, ug_producer(g, "n"), "relu,neg", "x"));
    mge_graph_free(g);
}

static void test_second_use_breaks(void)
{
    /* r is read twice: it ends its chain (alone, not fused); n -> m fuses */
    mge_graph *g = parse("input x : f32[N,6]\n"
                         "r = relu(x)\n"
                         "n = neg(r)\n"
                         "m = exp(n)\n"
                         "o2 = sigmoid(r)\n"
                         "output m, o2\n");
    if (!g)
        return;
    CHECK(apply(&g, 2, -2, 2) == 1);
    CHECK(g->nnodes == 3 && ug_count_op(g, MGE_OP_FUSED_ELEMWISE) == 1);
    CHECK(ug_producer(g, "r") && ug_producer(g, "r")->op == MGE_OP_RELU);
    CHECK(is_fused(g, ug_producer(g, "m"), "neg,exp", "r"));
    CHECK(ug_producer(g, "o2") && ug_producer(g, "o2")->op == MGE_OP_SIGMOID);
    CHECK(g->noutputs == 2 && strcmp(g->values[g->outputs[0]].name, "m") == 0 &&
          strcmp(g->values[g->outputs[1]].name, "o2") == 0);
    mge_graph_free(g);

    /* an intermediate that is a graph output stays a value: nothing fuses */
    check_noop("input x : f32[N,6]\n"
               "r = relu(x)\n"
               "n = neg(r)\n"
               "output r, n\n");
    /* x * x: both operands are the chain value */
    check_noop("input x : f32[N,6]\n"
               "r = relu(x)\n"
               "sq = mul(r, r)\n"
               "output sq\n");
}

static void test_operand_side(void)
{
    /* t is sub's second operand: not fused through; sub starts a chain of its own */
    mge_graph *g = parse("input x : f32[N,5]\n"
                         "input y : f32[N,5]\n"
                         "t = relu(x)\n"
                         "u = sub(y, t)\n"
                         "v = exp(u)\n"
                         "output v\n");
    if (!g)
        return;
    CHECK(apply(&g, 2, -1, 1) == 1);
    CHECK(g->nnodes == 2 && ug_count_op(g, MGE_OP_RELU) == 1);
    CHECK(is_fused(g, ug_producer(g, "v"), "sub,exp", "y,t"));
    mge_graph_free(g);

    /* div and pow with the chain value on the right end the chain too */
    check_noop("input x : f32[N,5]\n"
               "input y : f32[N,5]\n"
               "t = abs(x)\n"
               "u = div(y, t)\n"
               "output u\n");
    check_noop("input x : f32[N,5]\n"
               "input y : f32[N,5]\n"
               "t = abs(x)\n"
               "u = pow(y, t)\n"
               "output u\n");

    /* commuting ops take it on either side */
    g = parse("input x : f32[N,5]\n"
              "input y : f32[N,5]\n"
              "t = relu(x)\n"
              "u = add(y, t)\n"
              "w = maximum(y, u)\n"
              "z = minimum(x, w)\n"
              "q = mul(y, z)\n"
              "output q\n");
    if (!g)
        return;
    CHECK(apply(&g, 2, -1, 1) == 1);
    CHECK(g->nnodes == 1 && is_fused(g, ug_producer(g, "q"), "relu,add,maximum,minimum,mul", "x,y,y,x,y"));
    mge_graph_free(g);
}

static void test_binary_head(void)
{
    /* a chain starting at a binary op of two outside values: x is its first operand */
    mge_graph *g = parse("input x : f32[N,4,3]\n"
                         "input y : f32[3]\n"
                         "s = sub(x, y)\n"
                         "e = exp(s)\n"
                         "d = div(e, y)\n"
                         "output d\n");
    if (!g)
        return;
    CHECK(apply(&g, 2, -1, 1) == 1);
    CHECK(g->nnodes == 1 && is_fused(g, ug_producer(g, "d"), "sub,exp,div", "x,y,y"));
    mge_graph_free(g);

    /* a commuting first op takes the operand with the output's shape as x (in place) */
    g = parse("input x : f32[N,3,4,4]\n"
              "param b : f32[3,1,1] init=uniform(1)\n"
              "a = add(b, x)\n"
              "r = relu6(a)\n"
              "output r\n");
    if (!g)
        return;
    CHECK(apply(&g, 2, -4, 8) == 1);
    CHECK(g->nnodes == 1 && is_fused(g, ug_producer(g, "r"), "add,relu6", "x,b"));
    mge_graph_free(g);
}

static void test_loss_untouched(void)
{
    check_noop("input x : f32[N,4]\n"
               "input label : i32[N]\n"
               "fc = linear(x, out=3)\n"
               "r = relu(fc)\n"
               "n = neg(r)\n"
               "e = exp(n)\n"
               "loss = cross_entropy(e, label)\n"
               "output e\n"
               "minimize loss\n");
}

static void test_not_fused(void)
{
    /* integers, dropout, cast, single ops */
    check_noop("input x : i32[N,4]\n"
               "r = relu(x)\n"
               "n = neg(r)\n"
               "output n\n");
    check_noop("input x : f32[N,4]\n"
               "r = relu(x)\n"
               "d = dropout(r)\n"
               "n = neg(d)\n"
               "output n\n");
    check_noop("input x : f32[N,4]\n"
               "r = relu(x)\n"
               "c = cast(r, dtype=f16)\n"
               "output c\n");
    check_noop("input x : f32[N,4]\n"
               "fc = linear(x, out=3)\n"
               "r = relu(fc)\n"
               "fc2 = linear(r, out=2)\n"
               "output fc2\n");
    check_noop("input x : f32[N,4]\n"
               "output x\n");
}

static void test_leaky_alpha(void)
{
    /* different alphas split the chain; each part keeps its alpha */
    mge_graph *g = parse("input x : f32[N,9]\n"
                         "a = leaky_relu(x, alpha=0.1)\n"
                         "b = neg(a)\n"
                         "c = leaky_relu(b, alpha=0.25)\n"
                         "d = exp(c)\n"
                         "output d\n");
    if (!g)
        return;
    CHECK(apply(&g, 2, -2, 2) == 1);
    CHECK(g->nnodes == 2 && ug_count_op(g, MGE_OP_FUSED_ELEMWISE) == 2);
    const mge_node *p = ug_producer(g, "b"), *q = ug_producer(g, "d");
    CHECK(is_fused(g, p, "leaky_relu,neg", "x") && is_fused(g, q, "leaky_relu,exp", "b"));
    CHECK(p && fabs(mge_node_float(p, MGE_KEY_alpha, 0) - 0.1) < 1e-12);
    CHECK(q && fabs(mge_node_float(q, MGE_KEY_alpha, 0) - 0.25) < 1e-12);
    mge_graph_free(g);

    /* the same alpha: one chain */
    g = parse("input x : f32[N,9]\n"
              "a = leaky_relu(x, alpha=0.2)\n"
              "b = neg(a)\n"
              "c = leaky_relu(b, alpha=0.2)\n"
              "output c\n");
    if (!g)
        return;
    CHECK(apply(&g, 2, -2, 2) == 1);
    CHECK(g->nnodes == 1 && is_fused(g, ug_producer(g, "c"), "leaky_relu,neg,leaky_relu", "x"));
    CHECK(g->nnodes == 1 && fabs(mge_node_float(&g->nodes[0], MGE_KEY_alpha, 0) - 0.2) < 1e-12);
    mge_graph_free(g);
}

static void test_op_limit(void)
{
    /* 11 ops: the first 8 fuse, the last 3 make a second node */
    mge_graph *g = parse("input x : f32[N,8]\n"
                         "input y : f32[8]\n"
                         "a1 = add(x, y)\n"
                         "a2 = relu(a1)\n"
                         "a3 = mul(a2, y)\n"
                         "a4 = neg(a3)\n"
                         "a5 = abs(a4)\n"
                         "a6 = sub(a5, y)\n"
                         "a7 = hsigmoid(a6)\n"
                         "a8 = add(a7, x)\n"
                         "a9 = sqrt(a8)\n"
                         "a10 = hswish(a9)\n"
                         "a11 = tanh(a10)\n"
                         "output a11\n");
    if (!g)
        return;
    CHECK(apply(&g, 3, 0, 2) == 1);
    CHECK(g->nnodes == 2);
    CHECK(is_fused(g, ug_producer(g, "a8"), "add,relu,mul,neg,abs,sub,hsigmoid,add", "x,y,y,y,x"));
    CHECK(is_fused(g, ug_producer(g, "a11"), "sqrt,hswish,tanh", "a8"));
    mge_graph_free(g);
}

static void test_two_chains_join(void)
{
    /* two chains meet at an add: the earlier one takes it, the other stays a chain of its own */
    mge_graph *g = parse("input x : f32[N,3,5]\n"
                         "input y : f32[N,3,5]\n"
                         "p = relu(x)\n"
                         "q = sigmoid(p)\n"
                         "u = neg(y)\n"
                         "v = exp(u)\n"
                         "w = add(q, v)\n"
                         "z = gelu(w)\n"
                         "k = silu(z)\n"
                         "output k\n");
    if (!g)
        return;
    CHECK(apply(&g, 2, -2, 2) == 1);
    CHECK(g->nnodes == 2);
    CHECK(is_fused(g, ug_producer(g, "v"), "neg,exp", "y"));
    CHECK(is_fused(g, ug_producer(g, "k"), "relu,sigmoid,add,gelu,silu", "x,v"));
    mge_graph_free(g);
}

static void test_in_place(void)
{
    /* x is a node output that dies at the fused node: the planner runs it in place */
    mge_graph *g = parse("input x : f32[N,40]\n"
                         "param k : f32[40] init=uniform(1)\n"
                         "fc = linear(x, out=40)\n"
                         "a = mul(k, fc)\n"
                         "r = relu(a)\n"
                         "o = add(r, k)\n"
                         "output o\n");
    if (!g)
        return;
    CHECK(apply(&g, 64, -1, 1) == 1);
    CHECK(g->nnodes == 2 && is_fused(g, ug_producer(g, "o"), "mul,relu,add", "fc,k,k"));
    mge_error err;
    mge_error_clear(&err);
    mge_exec *e = NULL;
    mge_exec_opts o = {0};
    CHECK_OK(mge_exec_create(g, &o, &e, &err), err);
    mge_plan_stats st;
    memset(&st, 0, sizeof st);
    if (e)
        CHECK_OK(mge_exec_stats(e, MGE_BATCH(64), &st, &err), err);
    CHECK(st.ninplace == 1);
    mge_exec_free(e);
    mge_graph_free(g);
}

static void test_sample_nets(void)
{
    /* the bundled nets: fusing after strip-training keeps their numbers */
    static const char *const nets[] = {"samples/nets/mlp.mgt", "samples/nets/lenet.mgt"};
    for (size_t i = 0; i < sizeof nets / sizeof nets[0]; i++) {
        mge_graph *g = NULL;
        mge_error err;
        mge_error_clear(&err);
        if (mge_model_load(nets[i], &g, &err) != MGE_OK) {
            printf("skip %s: %s\n", nets[i], err.msg);
            continue;
        }
        CHECK_OK(mge_graph_init_params(g, 1, &err), err);
        int ch = 0;
        CHECK_OK(mge_passes_run_list(&g, "strip-training,dce", &ch, &err), err);
        apply(&g, 2, -1, 1);
        mge_graph_free(g);
    }
}

/* ---------------------------------------------------------------- kernels */

typedef struct kin {
    int ndim;
    int64_t dims[MGE_MAX_DIMS];
} kin;

/* fused_elemwise with ops on inputs of these shapes, values uniform in [lo, hi). */
static int kcase_make(ug_kcase *t, int nops, const int *ops, double alpha, int nin, const kin *ins, float lo, float hi)
{
    mge_error err;
    mge_error_clear(&err);
    memset(t, 0, sizeof *t);
    t->g = mge_graph_new();
    int ids[9];
    for (int i = 0; i < nin; i++) {
        char name[16];
        snprintf(name, sizeof name, "in%d", i);
        ids[i] = mge_graph_add_value(t->g, name, i ? MGE_VAL_PARAM : MGE_VAL_INPUT, MGE_F32, ins[i].ndim,
                                     ins[i].dims, &err);
        CHECK_MSG(ids[i] >= 0, "%s", err.msg);
    }
    mge_attr at[2];
    memset(at, 0, sizeof at);
    at[0].key = MGE_KEY_ops;
    at[0].n = nops;
    for (int k = 0; k < nops; k++)
        at[0].i[k] = ops[k];
    at[1].key = MGE_KEY_alpha;
    at[1].n = 1;
    at[1].f = alpha;
    if (!ug_kcase_node(t, MGE_OP_FUSED_ELEMWISE, nin, ids, 2, at))
        return 0;
    for (int i = 0; i < nin; i++) {
        CHECK_OK(mge_tensor_alloc(&t->in[i], MGE_F32, ins[i].ndim, ins[i].dims, &err), err);
        ug_uniform(&t->in[i], &rng, lo, hi);
    }
    return 1;
}

/* cpu against ref at 1, 2 and 3 threads (the same bits at each), in place
 * when x has the output's shape, and with input `self` (> 0) passed as x's
 * own tensor too (x op x, in place). */
static void check_kcase(ug_kcase *t, const char *desc, double rtol, int self)
{
    const mge_node *n = &t->g->nodes[t->node];
    const mge_kernel *kr = mge_backend_kernel(mge_backend_ref(), n->op, MGE_F32);
    const mge_kernel *kc = mge_backend_kernel(mge_backend_cpu(), n->op, MGE_F32);
    CHECK(kr && kc && kr->run && kc->run && kc->run != kr->run);
    if (!kr || !kc)
        return;
    mge_error err;
    mge_error_clear(&err);
    mge_tensor *in[9];
    for (int i = 0; i < t->nin; i++)
        in[i] = &t->in[i];
    if (self > 0)
        in[self] = &t->in[0];
    mge_tensor want, first;
    CHECK_OK(mge_tensor_copy(&want, &t->out, &err), err);
    CHECK_OK(ug_run_kernel(kr, NULL, n, in, &want, &err), err);
    memset(&first, 0, sizeof first);
    int inplace = mge_tensor_same_shape(&t->in[0], &t->out);
    for (int p = 0; p < 3; p++) {
        for (int ip = 0; ip <= inplace; ip++) {
            char what[256];
            snprintf(what, sizeof what, "%s threads=%d%s", desc, mge_pool_size(pools[p]), ip ? " in place" : "");
            mge_tensor got;
            if (ip) {   /* the output is a copy of x, passed as x (and as input `self`) */
                CHECK_OK(mge_tensor_copy(&got, &t->in[0], &err), err);
                in[0] = &got;
                if (self > 0)
                    in[self] = &got;
            } else {
                CHECK_OK(mge_tensor_copy(&got, &t->out, &err), err);
                float *gp = got.data;
                for (int64_t i = 0; i < mge_tensor_numel(&got); i++)
                    gp[i] = 12345.0f;   /* poison: every element must be written */
            }
            mge_status s = ug_run_kernel(kc, pools[p], n, in, &got, &err);
            CHECK_MSG(s == MGE_OK, "%s: %s", what, err.msg);
            CHECK_MSG(ug_compare(what, &got, &want, rtol), "%s", what);
            if (!first.data)
                CHECK_OK(mge_tensor_copy(&first, &got, &err), err);
            else
                CHECK_MSG(memcmp(first.data, got.data, got.nbytes) == 0, "%s: differs from 1 thread", what);
            in[0] = &t->in[0];
            if (self > 0)
                in[self] = &t->in[0];
            mge_tensor_free(&got);
        }
    }
    mge_tensor_free(&first);
    mge_tensor_free(&want);
}

#define NELEM(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const int unary_ops[] = {MGE_OP_RELU, MGE_OP_RELU6, MGE_OP_LEAKY_RELU, MGE_OP_SIGMOID, MGE_OP_TANH,
                                MGE_OP_GELU, MGE_OP_SILU,  MGE_OP_HSWISH,     MGE_OP_HSIGMOID, MGE_OP_EXP,
                                MGE_OP_LOG,  MGE_OP_SQRT,  MGE_OP_NEG,        MGE_OP_ABS};
static const int binary_ops[] = {MGE_OP_ADD, MGE_OP_SUB, MGE_OP_MUL, MGE_OP_DIV, MGE_OP_POW, MGE_OP_MAXIMUM,
                                 MGE_OP_MINIMUM};

static void test_kernel_each_op(void)
{
    kin big = {3, {3, 7, 101}};   /* 2121: two full tiles and a partial one */
    for (int i = 0; i < NELEM(unary_ops); i++) {
        int op = unary_ops[i];
        int pos = op == MGE_OP_LOG || op == MGE_OP_SQRT;
        ug_kcase t;
        /* the op alone, then after a mul so that the op sees a second value range */
        int ops[2] = {op, MGE_OP_MUL};
        kin ins[2] = {big, {1, {101}}};
        if (!kcase_make(&t, 2, ops, 0.3, 2, ins, pos ? 0.01f : -8, pos ? 5 : 8))
            continue;
        char d[64];
        snprintf(d, sizeof d, "[%s, mul]", mge_op_info(op)->name);
        check_kcase(&t, d, 2e-6, 0);
        ug_kcase_free(&t);
        int one[1] = {op};
        if (!kcase_make(&t, 1, one, 0.01, 1, ins, pos ? 0.01f : -8, pos ? 5 : 8))
            continue;
        snprintf(d, sizeof d, "[%s]", mge_op_info(op)->name);
        check_kcase(&t, d, 2e-6, 0);
        ug_kcase_free(&t);
    }
    for (int i = 0; i < NELEM(binary_ops); i++) {
        int op = binary_ops[i];
        int pos = op == MGE_OP_POW;
        ug_kcase t;
        int ops[2] = {op, MGE_OP_NEG};
        kin ins[2] = {big, big};
        if (!kcase_make(&t, 2, ops, 0.01, 2, ins, pos ? 0.1f : -4, 4))
            continue;
        if (op == MGE_OP_DIV) {   /* keep divisors away from 0 */
            float *b = t.in[1].data;
            for (int64_t k = 0; k < mge_tensor_numel(&t.in[1]); k++)
                b[k] = b[k] < 0 ? b[k] - 0.5f : b[k] + 0.5f;
        }
        if (op == MGE_OP_MAXIMUM || op == MGE_OP_MINIMUM) {   /* NaN propagates from either side */
            ((float *)t.in[0].data)[5] = NAN;
            ((float *)t.in[1].data)[17] = NAN;
        }
        char d[64];
        snprintf(d, sizeof d, "[%s, neg]", mge_op_info(op)->name);
        check_kcase(&t, d, 2e-6, 0);
        ug_kcase_free(&t);
    }
}

/* ops [mul, add, sigmoid, sub] with the three extra inputs of the given shapes, x of shape xs */
static void bcast_case(const char *desc, kin xs, kin a, kin b, kin c)
{
    int ops[4] = {MGE_OP_MUL, MGE_OP_ADD, MGE_OP_SIGMOID, MGE_OP_SUB};
    kin ins[4] = {xs, a, b, c};
    ug_kcase t;
    if (!kcase_make(&t, 4, ops, 0.01, 4, ins, -3, 3))
        return;
    check_kcase(&t, desc, 2e-6, 0);
    ug_kcase_free(&t);
}

static void test_kernel_broadcast(void)
{
    kin full = {4, {2, 5, 7, 9}};
    kin scalar0 = {0, {0}}, scalar1 = {1, {1}}, ones = {4, {1, 1, 1, 1}};
    kin chan = {3, {5, 1, 1}}, chan4 = {4, {1, 5, 1, 1}}, nc = {4, {2, 5, 1, 1}};
    kin row = {1, {9}}, hw = {2, {7, 9}}, gen = {4, {2, 1, 7, 1}}, gen2 = {3, {5, 1, 9}};
    bcast_case("same shape", full, full, full, full);
    bcast_case("scalars", full, scalar0, scalar1, ones);
    bcast_case("[C,1,1] and [1,C,1,1]", full, chan, chan4, nc);   /* inner 63 */
    bcast_case("[W] and [H,W]", full, row, hw, scalar0);          /* rows of 9: gathered */
    bcast_case("[N,1,H,1] and [C,1,W]", full, gen, gen2, chan);
    bcast_case("x broadcast: [C,1,1]", chan, full, row, gen);
    bcast_case("x scalar", scalar0, gen, full, chan4);
    bcast_case("output from extras only", chan, gen, gen2, scalar1);   /* [2,5,7,9] from parts */
    /* long runs: per channel over 17x19 planes, per row of 40 */
    kin f2 = {4, {3, 4, 17, 19}}, c2 = {3, {4, 1, 1}}, g2 = {4, {3, 1, 17, 1}}, r2 = {1, {19}};
    bcast_case("long channel runs", f2, c2, g2, r2);
    kin f3 = {2, {33, 40}}, r3 = {1, {40}}, col3 = {2, {33, 1}};
    bcast_case("[W] rows of 40 and a column", f3, r3, col3, scalar1);
    /* size-1 output dims and tiny shapes */
    kin f4 = {4, {2, 1, 7, 1}}, c4 = {2, {7, 1}}, s4 = {3, {1, 7, 1}};
    bcast_case("size-1 dims", f4, c4, s4, scalar0);
    kin one = {1, {1}};
    bcast_case("one element", one, scalar0, one, one);
    kin odd = {1, {1031}};
    bcast_case("1031 elements", odd, odd, scalar1, odd);
    /* an empty output */
    kin empty = {2, {0, 5}}, er = {1, {5}};
    bcast_case("empty", empty, er, scalar0, empty);
}

static void test_kernel_big(void)
{
    /* many tiles, cheap ops: split over 2 and 3 threads, the same bits */
    int ops[6] = {MGE_OP_MUL, MGE_OP_ADD, MGE_OP_RELU, MGE_OP_MAXIMUM, MGE_OP_LEAKY_RELU, MGE_OP_MINIMUM};
    kin ins[5] = {{4, {3, 16, 33, 31}}, {3, {16, 1, 1}}, {1, {31}}, {0, {0}}, {4, {3, 1, 33, 1}}};
    ug_kcase t;
    if (kcase_make(&t, 6, ops, 0.2, 5, ins, -2, 2)) {
        check_kcase(&t, "big [mul, add, relu, maximum, leaky_relu, minimum]", 2e-6, 0);
        ug_kcase_free(&t);
    }
    /* eight ops, transcendental */
    int ops8[8] = {MGE_OP_SUB, MGE_OP_TANH,  MGE_OP_MUL, MGE_OP_EXP,
                   MGE_OP_DIV, MGE_OP_SQRT, MGE_OP_POW, MGE_OP_GELU};
    kin ins8[5] = {{3, {6, 50, 70}}, {1, {70}}, {3, {6, 50, 70}}, {0, {0}}, {2, {50, 1}}};
    if (kcase_make(&t, 8, ops8, 0.01, 5, ins8, 0.5f, 2)) {
        check_kcase(&t, "eight ops", 1e-5, 0);
        ug_kcase_free(&t);
    }
}

static void test_kernel_self(void)
{
    /* silu(x) * x + b in place: the extra input is the output's own buffer,
     * read after the first op has run over the tile */
    int ops[3] = {MGE_OP_SILU, MGE_OP_MUL, MGE_OP_ADD};
    kin ins[3] = {{3, {4, 9, 130}}, {3, {4, 9, 130}}, {2, {9, 1}}};
    ug_kcase t;
    if (kcase_make(&t, 3, ops, 0.01, 3, ins, -2, 2)) {
        check_kcase(&t, "silu(x) * x + b", 2e-6, 1);
        ug_kcase_free(&t);
    }
}

static void test_kernel_errors(void)
{
    /* a wrong output shape fails with a message, on both backends */
    int ops[1] = {MGE_OP_ADD};
    kin ins[2] = {{2, {3, 4}}, {1, {4}}};
    ug_kcase t;
    if (!kcase_make(&t, 1, ops, 0.01, 2, ins, -1, 1))
        return;
    mge_error err;
    mge_error_clear(&err);
    mge_tensor bad;
    int64_t d[2] = {4, 3};
    CHECK_OK(mge_tensor_alloc(&bad, MGE_F32, 2, d, &err), err);
    mge_tensor *in[2] = {&t.in[0], &t.in[1]};
    const mge_node *n = &t.g->nodes[t.node];
    for (int b = 0; b < 2; b++) {
        const mge_backend *be = b ? mge_backend_cpu() : mge_backend_ref();
        mge_error_clear(&err);
        mge_status s = ug_run_kernel(mge_backend_kernel(be, n->op, MGE_F32), NULL, n, in, &bad, &err);
        CHECK_MSG(s == MGE_ERR_SHAPE && strstr(err.msg, "fused_elemwise"), "%s: %s", be->name, err.msg);
    }
    mge_tensor_free(&bad);
    ug_kcase_free(&t);
}

int main(int argc, char **argv)
{
    (void)argc;
    mge_rng_seed(&rng, 20261201);
    pools[0] = NULL;
    pools[1] = mge_pool_create(2);
    pools[2] = mge_pool_create(3);
    RUN(test_chain);
    RUN(test_unary_pair);
    RUN(test_second_use_breaks);
    RUN(test_operand_side);
    RUN(test_binary_head);
    RUN(test_loss_untouched);
    RUN(test_not_fused);
    RUN(test_leaky_alpha);
    RUN(test_op_limit);
    RUN(test_two_chains_join);
    RUN(test_in_place);
    RUN(test_sample_nets);
    RUN(test_kernel_each_op);
    RUN(test_kernel_broadcast);
    RUN(test_kernel_big);
    RUN(test_kernel_self);
    RUN(test_kernel_errors);
    mge_pool_free(pools[1]);
    mge_pool_free(pools[2]);
    return unit_rerun_baseline(argv, "test_pass_fuse_elemwise", unit_done());
}
