/* test_traits.c — ops.def's trait flags (MGE_OPF_ACT, TABLE, ZERO, LAYOUT,
 * DIFF) against what the ops do, so a wrong flag on a new op fails here
 * rather than in a pass that trusts it:
 *   TABLE  exactly the ops of kernels/kact.h's table;
 *   ACT    a TABLE op with at most alpha, accepted by fused_conv2d's act=
 *          (and the TABLE ops without ACT are refused there);
 *   ZERO   the ref kernel gives exactly 0 at 0 (0 op 0 for binary ops);
 *          the elementwise ops without it give something else for some
 *          attributes;
 *   LAYOUT only on elementwise ops;
 *   DIFF   the gradient rule, asked for a gradient, does not answer
 *          unsupported; without DIFF it does (for every op a node can be
 *          made of from f32 [2,3] inputs and no attributes);
 *   fused_elemwise accepts every TABLE op with at most alpha and gives the
 *   unfused op's bits on cpu; the table's derivatives of the older
 *   activations agree with their own *_grad kernels. */
#include "internal.h"
#include "kact.h"
#include "unit.h"
#include "unit_graph.h"

#include <math.h>

static mge_error err;

static void test_table(void)
{
    for (int op = 0; op < MGE_NOPS; op++) {
        unsigned f = mge_op_flags(op);
        const char *name = mge_op_info(op)->name;
        CHECK_MSG(!!(f & MGE_OPF_TABLE) == kact_has(op), "%s: TABLE flag %d but in kact.h %d", name,
                  !!(f & MGE_OPF_TABLE), kact_has(op));
        if (f & MGE_OPF_ACT)
            CHECK_MSG((f & MGE_OPF_TABLE) && mge_op_alpha_only(op), "%s: ACT needs TABLE and at most alpha", name);
        if (f & (MGE_OPF_LAYOUT | MGE_OPF_ZERO | MGE_OPF_TABLE))
            CHECK_MSG(f & MGE_OPF_ELEMWISE, "%s: LAYOUT, ZERO and TABLE ops are elementwise", name);
        CHECK(mge_op_flags(op) == mge_op_info(op)->flags);   /* the header copy is the registry's */
    }
}

/* op(x = 0) on ref, as a one-node f32 graph; attrs for the op. */
static double at_zero(int op, int nattr, const mge_attr *at)
{
    mge_graph *g = mge_graph_new();
    int64_t d = 1;
    int x = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 1, &d, &err);
    int in[2] = {x, x};
    int nin = mge_op_info(op)->min_in;
    int y = node(g, "y", op, nin, in, nattr, at);
    double r = NAN;
    mge_exec *e = NULL;
    mge_exec_opts o = {0};
    o.backend = "ref";
    if (y >= 0 && mge_graph_add_output(g, y, &err) == MGE_OK && mge_exec_create(g, &o, &e, &err) == MGE_OK) {
        mge_tensor t;
        CHECK_OK(mge_tensor_alloc(&t, MGE_F32, 1, &d, &err), err);
        ((float *)t.data)[0] = 0.0f;
        const mge_tensor *ins[1] = {&t};
        CHECK_OK(mge_exec_run(e, ins, &err), err);
        if (err.code == MGE_OK)
            r = ((const float *)mge_exec_result(e, 0)->data)[0];
        mge_tensor_free(&t);
    } else {
        CHECK_MSG(0, "%s: %s", mge_op_info(op)->name, err.msg);
    }
    mge_exec_free(e);
    mge_graph_free(g);
    return r;
}

static void test_zero(void)
{
    int checked = 0;
    for (int op = 0; op < MGE_NOPS; op++) {
        unsigned f = mge_op_flags(op);
        const mge_opinfo *oi = mge_op_info(op);
        int unary = (f & MGE_OPF_TABLE) != 0, binary = mge_fused_binary_ok(op);
        if (!unary && !binary)
            continue;
        mge_attr at[2];
        int na = 0;
        if (op == MGE_OP_CLAMP)
            at[na++] = A_f(MGE_KEY_min, 1);   /* clamp(0, min=1) = 1 */
        if (op == MGE_OP_HARDTANH)
            at[na++] = A_f(MGE_KEY_min, 0.5), at[na++] = A_f(MGE_KEY_max, 1);
        if (op == MGE_OP_SHRINK)   /* shrink(0, lambd=-1, shift=0.5) = -0.5 */
            at[na++] = A_f(MGE_KEY_lambd, -1), at[na++] = A_f(MGE_KEY_shift, 0.5);
        double v = at_zero(op, na, at);
        checked++;
        if (f & MGE_OPF_ZERO)
            CHECK_MSG(v == 0, "%s has ZERO but gives %g at 0", oi->name, v);
        else
            CHECK_MSG(v != 0, "%s gives 0 at 0 (in this case): does it lack ZERO?", oi->name);
    }
    CHECK(checked >= 47);   /* 40 table ops and 7 binary ones */
}

/* A node of op from min_in f32 [2,3] inputs, no attributes; its grad rule
 * asked for every input's gradient. -1: no such node can be made. */
static int grad_status(int op)
{
    const mge_opinfo *oi = mge_op_info(op);
    if (oi->min_in < 1 || oi->min_in > 4 || oi->nout != 1)
        return -1;
    mge_graph *g = mge_graph_new();
    int64_t d[2] = {2, 3};
    int in[4];
    for (int i = 0; i < oi->min_in; i++) {
        char nm[8];
        snprintf(nm, sizeof nm, "x%d", i);
        in[i] = mge_graph_add_value(g, nm, MGE_VAL_PARAM, MGE_F32, 2, d, &err);
    }
    const char *outs[1] = {"y"};
    int n = mge_graph_add_node(g, "y", op, oi->min_in, in, 0, NULL, 1, outs, &err);
    int r = -1;
    if (n >= 0) {
        int dy = g->nodes[n].out[0], dx[4] = {-1, -1, -1, -1};
        char want[4] = {1, 1, 1, 1};
        mge_error_clear(&err);
        r = mge_op_grad_fn(op)(g, n, &dy, want, dx, &err);
    }
    mge_graph_free(g);
    return r;
}

static void test_diff(void)
{
    int checked = 0;
    for (int op = 0; op < MGE_NOPS; op++) {
        int s = grad_status(op);
        if (s < 0)
            continue;
        checked++;
        if (mge_op_flags(op) & MGE_OPF_DIFF)
            CHECK_MSG(s != MGE_ERR_UNSUPPORTED, "%s has DIFF but its rule says: %s", mge_op_info(op)->name, err.msg);
        else
            CHECK_MSG(s == MGE_ERR_UNSUPPORTED, "%s lacks DIFF but its rule answers %d", mge_op_info(op)->name, s);
    }
    printf("  %d ops checked for DIFF\n", checked);
    CHECK(checked > 50);
}

/* fused_conv2d(act=op) is accepted exactly for the ACT ops. */
static void test_act(void)
{
    for (int op = 0; op < MGE_NOPS; op++) {
        if (!(mge_op_flags(op) & MGE_OPF_TABLE))
            continue;
        mge_graph *g = mge_graph_new();
        int64_t xd[4] = {1, 2, 5, 5}, wd[4] = {3, 2, 3, 3};
        int in[2] = {mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 4, xd, &err),
                     mge_graph_add_value(g, "w", MGE_VAL_PARAM, MGE_F32, 4, wd, &err)};
        int64_t k[2] = {3, 3};
        mge_attr at[4] = {A(MGE_KEY_out, 3), A_ints(MGE_KEY_kernel, 2, k), A(MGE_KEY_bias, 0),
                          A(MGE_KEY_act, op)};
        const char *outs[1] = {"y"};
        int n = mge_graph_add_node(g, "y", MGE_OP_FUSED_CONV2D, 2, in, 4, at, 1, outs, &err);
        if (mge_op_flags(op) & MGE_OPF_ACT)
            CHECK_MSG(n >= 0, "act=%s refused: %s", mge_op_info(op)->name, err.msg);
        else
            CHECK_MSG(n < 0 && strstr(err.msg, "expected none, relu, "), "act=%s accepted",
                      mge_op_info(op)->name);
        mge_graph_free(g);
    }
}

/* fused_elemwise(x, ops=[op]) on cpu has the bits of op(x) on cpu (the
 * same table expressions), for every op it accepts, edge values included. */
static void test_fused_same_bits(void)
{
    int checked = 0;
    for (int op = 0; op < MGE_NOPS; op++) {
        if (!mge_fused_unary_ok(op))
            continue;
        double alpha = 0.3;
        int has_alpha = !mge_op_alpha_only(op) ? 0 : mge_op_info(op)->schema[0] != 0;
        mge_graph *g = mge_graph_new();
        int64_t d = 3001;
        int x = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 1, &d, &err);
        mge_attr a1 = A_f(MGE_KEY_alpha, alpha);
        int y1 = node(g, "y1", op, 1, &x, has_alpha, &a1);
        int64_t ops[1] = {op};
        mge_attr a2[2] = {A_ints(MGE_KEY_ops, 1, ops), A_f(MGE_KEY_alpha, alpha)};
        int y2 = node(g, "y2", MGE_OP_FUSED_ELEMWISE, 1, &x, 2, a2);
        CHECK_MSG(y1 >= 0 && y2 >= 0, "%s", mge_op_info(op)->name);
        if (y1 < 0 || y2 < 0) {
            mge_graph_free(g);
            continue;
        }
        CHECK_OK(mge_graph_add_output(g, y1, &err), err);
        CHECK_OK(mge_graph_add_output(g, y2, &err), err);
        mge_exec *e = NULL;
        mge_exec_opts o = {0};
        o.backend = "cpu";
        CHECK_OK(mge_exec_create(g, &o, &e, &err), err);
        mge_tensor t;
        CHECK_OK(mge_tensor_alloc(&t, MGE_F32, 1, &d, &err), err);
        mge_rng r;
        mge_rng_seed(&r, 7 + (uint64_t)op);
        float *p = t.data;
        for (int64_t i = 0; i < d; i++)
            p[i] = 12 * (mge_rng_uniform(&r) - 0.5f);
        p[0] = 0.0f, p[1] = -0.0f, p[2] = NAN, p[3] = INFINITY, p[4] = -INFINITY, p[5] = 0.5f, p[6] = 1e30f;
        const mge_tensor *ins[1] = {&t};
        if (e && mge_exec_run(e, ins, &err) == MGE_OK) {
            const uint32_t *u1 = mge_exec_result(e, 0)->data, *u2 = mge_exec_result(e, 1)->data;
            int64_t bad = -1;
            for (int64_t i = 0; i < d && bad < 0; i++)
                if (u1[i] != u2[i] && !(isnan(((const float *)u1)[i]) && isnan(((const float *)u2)[i])))
                    bad = i;
            CHECK_MSG(bad < 0, "%s: fused and unfused differ at %lld (x = %g)", mge_op_info(op)->name,
                      (long long)bad, bad >= 0 ? p[bad] : 0.0);
            checked++;
        } else {
            CHECK_MSG(0, "%s: %s", mge_op_info(op)->name, err.msg);
        }
        mge_tensor_free(&t);
        mge_exec_free(e);
        mge_graph_free(g);
    }
    CHECK(checked >= 28);
}

/* The table's derivative column of the older activations, which still
 * emit their own gradient ops: unary_grad(dy, t; act=op) gives what the
 * op's *_grad kernel gives (ref, t from the side the table names). */
static void test_old_derivatives(void)
{
    static const struct {
        int op, gop;
    } cs[] = {
        {MGE_OP_RELU, MGE_OP_RELU_GRAD},       {MGE_OP_RELU6, MGE_OP_RELU6_GRAD},
        {MGE_OP_LEAKY_RELU, MGE_OP_LEAKY_RELU_GRAD}, {MGE_OP_SIGMOID, MGE_OP_SIGMOID_GRAD},
        {MGE_OP_TANH, MGE_OP_TANH_GRAD},       {MGE_OP_GELU, MGE_OP_GELU_GRAD},
        {MGE_OP_SILU, MGE_OP_SILU_GRAD},       {MGE_OP_HSWISH, MGE_OP_HSWISH_GRAD},
        {MGE_OP_HSIGMOID, MGE_OP_HSIGMOID_GRAD}, {MGE_OP_ABS, MGE_OP_ABS_GRAD},
    };
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        int op = cs[c].op;
        mge_graph *g = mge_graph_new();
        int64_t d = 4001;
        int dy = mge_graph_add_value(g, "dy", MGE_VAL_INPUT, MGE_F32, 1, &d, &err);
        int x = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 1, &d, &err);
        int t = kact_wrt_y(op) ? un(g, "y", op, x) : x;
        int in[2] = {dy, t};
        mge_attr a1[2] = {A(MGE_KEY_act, op), A_f(MGE_KEY_alpha, 0.2)};
        mge_attr a2 = A_f(MGE_KEY_alpha, 0.2);
        int g1 = node(g, "g1", MGE_OP_UNARY_GRAD, 2, in, 2, a1);
        int g2 = node(g, "g2", cs[c].gop, 2, in, op == MGE_OP_LEAKY_RELU, &a2);
        CHECK(g1 >= 0 && g2 >= 0);
        CHECK_OK(mge_graph_add_output(g, g1, &err), err);
        CHECK_OK(mge_graph_add_output(g, g2, &err), err);
        mge_exec *e = NULL;
        mge_exec_opts o = {0};
        o.backend = "ref";
        CHECK_OK(mge_exec_create(g, &o, &e, &err), err);
        mge_tensor td, tx;
        CHECK_OK(mge_tensor_alloc(&td, MGE_F32, 1, &d, &err), err);
        CHECK_OK(mge_tensor_alloc(&tx, MGE_F32, 1, &d, &err), err);
        for (int64_t i = 0; i < d; i++) {
            ((float *)td.data)[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
            ((float *)tx.data)[i] = -8.0f + 16.0f * (float)i / (float)(d - 1);   /* hits 0 and +-3 and 6 */
        }
        const mge_tensor *ins[2];
        for (int i = 0; e && i < mge_exec_ninputs(e); i++)
            ins[i] = mge_exec_input(e, i) == dy ? &td : &tx;
        if (e && mge_exec_run(e, ins, &err) == MGE_OK) {
            const float *r1 = mge_exec_result(e, 0)->data, *r2 = mge_exec_result(e, 1)->data;
            double worst = 0;
            int64_t at = 0;
            for (int64_t i = 0; i < d; i++) {
                double diff = fabs((double)r1[i] - (double)r2[i]);
                if (diff > worst)
                    worst = diff, at = i;
            }
            CHECK_MSG(worst <= 1e-6, "%s: unary_grad and %s differ by %g at x = %g", mge_op_info(op)->name,
                      mge_op_info(cs[c].gop)->name, worst, (double)((float *)tx.data)[at]);
        } else {
            CHECK_MSG(0, "%s: %s", mge_op_info(op)->name, err.msg);
        }
        mge_tensor_free(&td);
        mge_tensor_free(&tx);
        mge_exec_free(e);
        mge_graph_free(g);
    }
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(test_table);
    RUN(test_zero);
    RUN(test_diff);
    RUN(test_act);
    RUN(test_fused_same_bits);
    RUN(test_old_derivatives);
    return unit_rerun_baseline(argv, "test_traits", unit_done());
}
