/* test_pass_unfuse.c — the unfuse pass: small plain nets go through -O2
 * (fused, Winograd and blocked ops, as the ISA allows), then unfuse; the
 * result must hold none of those ops, the expected plain op counts, the
 * outputs' names, and the plain graph's numbers. Also: what unfuse must
 * refuse (a pre-transformed Winograd weight) leaves the graph as it was,
 * and graphs without fused ops are byte-identical no-ops. The binary runs
 * itself again with MGE_CPU_ISA=avx2 (layout blocks by 8, depthwise
 * regions only) and baseline (no layout). */
#include "internal.h"
#include "unit.h"
#include "unit_graph.h"

static mge_rng rng;

static const char *const o2 = "strip-training,fold-bn,fold-scale,cse,fold-constants,dce,fuse-activation,layout,"
                              "winograd,fuse-elemwise";

static const char *isa_name(void)
{
    int isa = mge_cpu_isa();
    return isa >= MGE_ISA_AVX512 ? "avx512" : isa >= MGE_ISA_AVX2 ? "avx2" : "baseline";
}

/* The layout pass's block here: 16 (AVX-512), 8 (AVX2, depthwise regions only), else 0. */
static int block_here(void)
{
    int isa = mge_cpu_isa();
    return isa >= MGE_ISA_AVX512 ? 16 : isa >= MGE_ISA_AVX2 ? 8 : 0;
}

static int fancy_ops(const mge_graph *g)
{
    static const int ops[] = {MGE_OP_FUSED_CONV2D, MGE_OP_FUSED_LINEAR, MGE_OP_FUSED_ELEMWISE,
                              MGE_OP_CONV2D_WINOGRAD, MGE_OP_WINOGRAD_WEIGHT, MGE_OP_TO_NCHWC,
                              MGE_OP_FROM_NCHWC, MGE_OP_CONV2D_NCHWC, MGE_OP_MAXPOOL2D_NCHWC};
    int k = 0;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        k += ug_count_op(g, ops[i]);
    for (int v = 0; v < g->nvalues; v++)
        k += g->values[v].ndim == 5; /* no blocked tensor nor stem view left */
    return k;
}

/* src parsed, params seeded, batchnorm statistics away from the identity. */
static mge_graph *parse(const char *src)
{
    mge_graph *g = ug_parse(src);
    mge_error err = {0};
    if (!g)
        return NULL;
    CHECK_OK(mge_graph_init_params(g, 11, &err), err);
    static const float lo[4] = {0.5f, -0.3f, -0.3f, 0.5f}, hi[4] = {1.5f, 0.3f, 0.3f, 1.5f};
    for (int i = 0; i < g->nnodes; i++) {
        const mge_node *n = &g->nodes[i];
        if (n->op != MGE_OP_BATCHNORM)
            continue;
        for (int k = 1; k <= 4; k++)
            if (g->values[n->in[k]].data)
                ug_uniform(g->values[n->in[k]].data, &rng, lo[k - 1], hi[k - 1]);
    }
    return g;
}

static void run_graph(const mge_graph *g, ug_outs *res)
{
    ug_fill normal = {1, 0, 0, 0};
    ug_run(g, NULL, 1, 2, normal, res);
}

/* What -O2 made of the net. */
typedef struct seen {
    int fused, wino, blocked, elem;
} seen;

/* src through -O2 then unfuse; checks the numbers against the plain graph
 * and the -O2 one, the output names, that nothing fused is left and that a
 * second unfuse changes nothing. Returns the unfused graph (NULL on failure). */
static mge_graph *o2_unfuse(const char *what, const char *src, seen *s)
{
    mge_error err = {0};
    mge_graph *g = parse(src);
    memset(s, 0, sizeof *s);
    if (!g)
        return NULL;
    ug_outs plain = {0}, opt = {0}, un = {0};
    run_graph(g, &plain);
    int nout = g->noutputs;
    char names[4][64];
    for (int i = 0; i < nout && i < 4; i++)
        snprintf(names[i], sizeof names[i], "%s", g->values[g->outputs[i]].name);
    CHECK_OK(mge_passes_run_list(&g, o2, NULL, &err), err);
    s->fused = ug_count_op(g, MGE_OP_FUSED_CONV2D) + ug_count_op(g, MGE_OP_FUSED_LINEAR);
    s->wino = ug_count_op(g, MGE_OP_CONV2D_WINOGRAD);
    s->blocked = ug_count_op(g, MGE_OP_CONV2D_NCHWC);
    s->elem = ug_count_op(g, MGE_OP_FUSED_ELEMWISE);
    printf("  %s (%s): -O2 gave %d fused layers, %d winograd, %d nchwc convs, %d fused_elemwise\n", what,
           isa_name(), s->fused, s->wino, s->blocked, s->elem);
    CHECK_MSG(fancy_ops(g) > 0, "%s: -O2 fused nothing", what);
    run_graph(g, &opt);
    int changed = -1;
    CHECK_OK(mge_passes_run_list(&g, "unfuse", &changed, &err), err);
    CHECK(changed == 1);
    CHECK_OK(mge_graph_validate(g, &err), err);
    CHECK_MSG(fancy_ops(g) == 0, "%s: fused, winograd or blocked ops left", what);
    CHECK(g->noutputs == nout);
    for (int i = 0; i < nout && i < 4; i++)
        CHECK_MSG(strcmp(g->values[g->outputs[i]].name, names[i]) == 0, "%s: output %d is %s, was %s", what, i,
                  g->values[g->outputs[i]].name, names[i]);
    run_graph(g, &un);
    ug_check_close(&plain, &un, 2e-5);
    ug_check_close(&opt, &un, 2e-5);
    ug_outs_free(&plain);
    ug_outs_free(&opt);
    ug_outs_free(&un);
    int again = -1;
    CHECK_OK(mge_passes_run_list(&g, "unfuse", &again, &err), err);
    CHECK(again == 0);
    return g;
}

/* The value `name` is made by op (and exists). */
static int made_by(const mge_graph *g, const char *name, int op)
{
    const mge_node *n = ug_producer(g, name);
    return n && n->op == op;
}

/* conv + batchnorm + relu, twice, with a residual: fused_conv2d (residual,
 * act) at AVX2/baseline, conv2d_nchwc with the epilogue at AVX-512. */
static void test_residual_block(void)
{
    const char *src = "input x : f32[N,16,12,12]\n"
                      "c1 = conv2d(x, out=16, kernel=3, pad=1, bias=false)\n"
                      "b1 = batchnorm(c1)\n"
                      "r1 = relu(b1)\n"
                      "c2 = conv2d(r1, out=16, kernel=3, pad=1, bias=false)\n"
                      "b2 = batchnorm(c2)\n"
                      "a = add(b2, x)\n"
                      "r2 = leaky_relu(a, alpha=0.2)\n"
                      "p = global_avgpool(r2)\n"
                      "output p, r2\n";
    seen s;
    mge_graph *g = o2_unfuse("residual block", src, &s);
    if (!g)
        return;
    CHECK(s.fused + s.blocked == 2);
    CHECK(ug_count_op(g, MGE_OP_CONV2D) == 2 && ug_count_op(g, MGE_OP_RELU) == 1 &&
          ug_count_op(g, MGE_OP_ADD) == 1 && ug_count_op(g, MGE_OP_LEAKY_RELU) == 1 &&
          ug_count_op(g, MGE_OP_BATCHNORM) == 0);
    /* r2 = leaky_relu(add(conv2d(...), x)), alpha kept, every step a named value */
    const mge_node *act = ug_producer(g, "r2");
    CHECK(act && act->op == MGE_OP_LEAKY_RELU && fabs(mge_node_float(act, MGE_KEY_alpha, 0) - 0.2) < 1e-12);
    if (act) {
        const mge_node *add = &g->nodes[g->values[act->in[0]].producer];
        CHECK(add->op == MGE_OP_ADD && strcmp(g->values[add->in[1]].name, "x") == 0);
        CHECK(g->values[add->in[0]].producer >= 0 &&
              g->nodes[g->values[add->in[0]].producer].op == MGE_OP_CONV2D);
    }
    CHECK(made_by(g, "r1", MGE_OP_RELU));
    mge_graph_free(g);
}

/* A mobilenet-like block: a 3-channel stem (read as blocks of one channel),
 * maxpool, expand 1x1, depthwise 3x3, project 1x1 with a residual, then
 * neg and maximum on blocked tensors that fuse-elemwise takes. */
static void test_mobilenet_block(void)
{
    const char *src = "input x : f32[N,3,20,20]\n"
                      "s = conv2d(x, out=16, kernel=3, stride=2, pad=1)\n"
                      "sr = relu6(s)\n"
                      "mp = maxpool2d(sr, kernel=3, stride=1, pad=1)\n"
                      "e = conv2d(mp, out=32, kernel=1, bias=false)\n"
                      "eb = batchnorm(e)\n"
                      "er = relu6(eb)\n"
                      "dw = conv2d(er, out=32, kernel=3, pad=1, groups=32, bias=false)\n"
                      "db = batchnorm(dw)\n"
                      "dr = relu6(db)\n"
                      "pj = conv2d(dr, out=16, kernel=1, bias=false)\n"
                      "pb = batchnorm(pj)\n"
                      "a = add(pb, mp)\n"
                      "ng = neg(a)\n"
                      "m = maximum(ng, mp)\n"
                      "gp = global_avgpool(m)\n"
                      "output gp\n";
    seen s;
    mge_graph *g = o2_unfuse("mobilenet block", src, &s);
    if (!g)
        return;
    if (!block_here())
        printf("  mobilenet block: no layout at this ISA (%s): blocked ops not exercised\n", isa_name());
    else
        CHECK_MSG(s.blocked == 4, "%d nchwc convs", s.blocked);
    CHECK(ug_count_op(g, MGE_OP_CONV2D) == 4 && ug_count_op(g, MGE_OP_RELU6) == 3 &&
          ug_count_op(g, MGE_OP_MAXPOOL2D) == 1 && ug_count_op(g, MGE_OP_ADD) == 1 &&
          ug_count_op(g, MGE_OP_NEG) == 1 && ug_count_op(g, MGE_OP_MAXIMUM) == 1 &&
          ug_count_op(g, MGE_OP_RESHAPE) == 0);
    /* the names layout took the blocked values from come back (ng went
     * into fused_elemwise, which keeps only its chain's last name) */
    CHECK(made_by(g, "mp", MGE_OP_MAXPOOL2D) && made_by(g, "m", MGE_OP_MAXIMUM) && made_by(g, "sr", MGE_OP_RELU6));
    CHECK(made_by(g, "m.e1", MGE_OP_NEG));
    /* the depthwise weight unpacked to [32, 1, 3, 3] */
    const mge_node *dwn = NULL;
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i].op == MGE_OP_CONV2D && mge_node_int(&g->nodes[i], MGE_KEY_groups, 1) == 32)
            dwn = &g->nodes[i];
    CHECK(dwn != NULL);
    if (dwn) {
        const mge_value *w = &g->values[dwn->in[1]];
        CHECK(w->ndim == 4 && w->dims[0] == 32 && w->dims[1] == 1 && w->dims[2] == 3 && w->dims[3] == 3 && w->data);
    }
    mge_graph_free(g);
}

/* A region whose values are read plain too (r1 is an output and feeds
 * the next conv), a stride-2 conv, a depthwise conv with a residual. */
static void test_shared_outputs(void)
{
    const char *src = "input x : f32[N,12,10,10]\n"
                      "c1 = conv2d(x, out=24, kernel=3, pad=1)\n"
                      "r1 = relu(c1)\n"
                      "c2 = conv2d(r1, out=24, kernel=3, stride=2, pad=1)\n"
                      "dw = conv2d(c2, out=24, kernel=3, pad=1, groups=24)\n"
                      "a = add(dw, c2)\n"
                      "r2 = relu6(a)\n"
                      "c3 = conv2d(r2, out=24, kernel=1)\n"
                      "p = global_avgpool(c3)\n"
                      "output p, r1\n";
    seen s;
    mge_graph *g = o2_unfuse("shared outputs", src, &s);
    if (!g)
        return;
    if (block_here())
        CHECK(s.blocked == 4);
    CHECK(ug_count_op(g, MGE_OP_CONV2D) == 4 && ug_count_op(g, MGE_OP_RELU) == 1 &&
          ug_count_op(g, MGE_OP_ADD) == 1 && ug_count_op(g, MGE_OP_RELU6) == 1);
    CHECK(made_by(g, "r1", MGE_OP_RELU) && made_by(g, "c3", MGE_OP_CONV2D) && made_by(g, "c2", MGE_OP_CONV2D));
    mge_graph_free(g);
}

/* A chain of elementwise ops with a broadcast operand and a leaky_relu. */
static void test_elemwise_chain(void)
{
    const char *src = "input x : f32[N,6,5]\n"
                      "input y : f32[N,6,5]\n"
                      "param s : f32[5] init=uniform(0.5)\n"
                      "a = mul(x, y)\n"
                      "t = tanh(a)\n"
                      "b = sub(t, s)\n"
                      "l = leaky_relu(b, alpha=0.3)\n"
                      "d = add(y, l)\n"
                      "output d\n";
    seen s;
    mge_graph *g = o2_unfuse("elemwise chain", src, &s);
    if (!g)
        return;
    CHECK(s.elem == 1);
    CHECK(g->nnodes == 5 && ug_count_op(g, MGE_OP_MUL) == 1 && ug_count_op(g, MGE_OP_TANH) == 1 &&
          ug_count_op(g, MGE_OP_SUB) == 1 && ug_count_op(g, MGE_OP_LEAKY_RELU) == 1 && ug_count_op(g, MGE_OP_ADD) == 1);
    /* binary ops take the chain value first: sub(t, s), not sub(s, t) */
    for (int i = 0; i < g->nnodes; i++) {
        const mge_node *n = &g->nodes[i];
        if (n->op == MGE_OP_SUB)
            CHECK(strcmp(g->values[n->in[1]].name, "s") == 0 && g->values[n->in[0]].ndim == 3);
        if (n->op == MGE_OP_LEAKY_RELU)
            CHECK(fabs(mge_node_float(n, MGE_KEY_alpha, 0) - 0.3) < 1e-12);
    }
    CHECK(made_by(g, "d", MGE_OP_ADD));
    mge_graph_free(g);
}

/* One 3x3 conv with bias, residual and relu on 64 channels at 24x24 (a
 * lone conv: no layout region) goes Winograd F(4,3); a linear + relu goes
 * fused_linear. */
static void test_winograd(void)
{
    const char *src = "input x : f32[N,64,24,24]\n"
                      "c = conv2d(x, out=64, kernel=3, pad=1)\n"
                      "a = add(c, x)\n"
                      "r = relu(a)\n"
                      "p = global_avgpool(r)\n"
                      "f = flatten(p)\n"
                      "l = linear(f, out=10)\n"
                      "o = sigmoid(l)\n"
                      "output o\n";
    seen s;
    mge_graph *g = o2_unfuse("winograd conv", src, &s);
    if (!g)
        return;
    CHECK(s.wino == 1 && s.fused == 1);
    CHECK(ug_count_op(g, MGE_OP_CONV2D) == 1 && ug_count_op(g, MGE_OP_ADD) == 1 && ug_count_op(g, MGE_OP_RELU) == 1 &&
          ug_count_op(g, MGE_OP_LINEAR) == 1 && ug_count_op(g, MGE_OP_SIGMOID) == 1);
    const mge_node *conv = NULL;
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i].op == MGE_OP_CONV2D)
            conv = &g->nodes[i];
    CHECK(conv && mge_node_ints(conv, MGE_KEY_kernel, 0, 0) == 3 && mge_node_ints(conv, MGE_KEY_kernel, 1, 0) == 3 &&
          mge_node_ints(conv, MGE_KEY_pad, 0, 0) == 1 && conv->nin == 3 &&
          g->values[conv->in[1]].ndim == 4 && g->values[conv->in[1]].dims[2] == 3);
    mge_graph_free(g);
}

/* conv2d_winograd on a stored, already transformed weight: refused with a
 * message naming the node, the graph unchanged. */
static void test_refuse(void)
{
    const char *src = "input x : f32[N,8,6,6]\n"
                      "param wt : f32[36,8,8] init=uniform(0.1)\n"
                      "y = conv2d_winograd(x, wt, out=8, pad=1, bias=false)\n"
                      "output y\n";
    mge_graph *g = parse(src);
    if (!g)
        return;
    mge_buf a, b;
    ug_file_bytes(g, &a);
    mge_graph *before = g;
    mge_error err = {0};
    int changed = -1;
    mge_status st = mge_passes_run_list(&g, "unfuse", &changed, &err);
    CHECK(st == MGE_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "y (conv2d_winograd)") && strstr(err.msg, "winograd_weight"), "message: %s", err.msg);
    CHECK(g == before);
    ug_file_bytes(g, &b);
    CHECK(a.n == b.n && memcmp(a.p, b.p, a.n) == 0);
    mge_buf_free(&a);
    mge_buf_free(&b);
    mge_graph_free(g);
}

/* Graphs with nothing to unfuse: *changed = 0, the same bytes. */
static void test_noop(void)
{
    const char *srcs[] = {
        "input x : f32[N,16,8,8]\nc1 = conv2d(x, out=16, kernel=3, pad=1)\nr = relu(c1)\n"
        "p = maxpool2d(r, kernel=2)\nc2 = conv2d(p, out=16, kernel=1)\noutput c2\n",
        "input x : f32[N,8]\nl = linear(x, out=4)\ns = softmax(l)\noutput s\n",
        /* a reshape to [.., 1] that is no stem view, and a lone winograd_weight */
        "input x : f32[N,4,3,3]\nparam w : f32[4,4,3,3] init=uniform(0.1)\nr = reshape(x, shape=[0,0,0,0,1])\n"
        "t = winograd_weight(w, tile=2)\noutput r, t\n",
    };
    for (size_t k = 0; k < sizeof srcs / sizeof srcs[0]; k++) {
        mge_graph *g = parse(srcs[k]);
        if (g)
            ug_check_noop(g, "unfuse", srcs[k]);
    }
}

/* Runs this binary again with MGE_CPU_ISA=avx2 when the CPU has AVX-512
 * (layout blocks by 8 there, and only depthwise regions). */
static int rerun_avx2(char **argv, int rc)
{
    if (getenv("MGE_CPU_ISA") || mge_cpu_isa() < MGE_ISA_AVX512)
        return rc;
    printf("test_pass_unfuse: again with MGE_CPU_ISA=avx2\n");
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("MGE_CPU_ISA", "avx2", 1);
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "test_pass_unfuse: the run with MGE_CPU_ISA=avx2 failed\n");
        return 1;
    }
    return rc;
}

int main(int argc, char **argv)
{
    (void)argc;
    mge_rng_seed(&rng, 20261201);
    RUN(test_residual_block);
    RUN(test_mobilenet_block);
    RUN(test_shared_outputs);
    RUN(test_elemwise_chain);
    RUN(test_winograd);
    RUN(test_refuse);
    RUN(test_noop);
    int rc = rerun_avx2(argv, unit_done());
    return unit_rerun_baseline(argv, "test_pass_unfuse", rc);
}
