/* test_parity.c — every op x dtype a backend claims, run on that backend
 * and on ref (the oracle) through the public executor, forward and through
 * the op's gradient graph, on random valid cases from the generators of
 * parity_cases.h; tolerances per op in one table (specs[] below).
 *
 *   - backends[] lists what is compared with ref; each runs through
 *     run_graph_on() (mge_exec_* with the backend's name) at each of its
 *     thread counts. One absent from this build prints why it is skipped.
 *   - backend_claims() says which op x dtype a backend has a kernel for;
 *     those are the pairs the coverage check demands cases for.
 *   - The gradient graph of a case seeds d(output 0) with a random dy
 *     (mge_grad_build_from) and compares every input's gradient; the rules
 *     themselves are checked against finite differences in test_grad_*.c.
 *   - The coverage check fails when an op has neither a generator nor a
 *     "covered by the gradient graphs of ..." entry, or when a claimed op x
 *     dtype ran in no compared graph and is not in not_covered[].
 *
 * Environment: PARITY_SEED (the run's seed, printed on failure),
 * PARITY_OP=name (one op only; the coverage check is then skipped),
 * PARITY_CASES=k (k times the cases of the table, for a deeper search),
 * PARITY_DEBUG=1 (print why the graph refused each random geometry),
 * PARITY_VERBOSE=1 or -v (per op x dtype: cases, largest error, the share
 * of the tolerance used). The run repeats with MGE_CPU_ISA=baseline so the
 * cpu backend's portable loops are compared too. */
#include "parity_cases.h"

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* ---------------------------------------------------------------- backends */

typedef struct pbackend {
    const char *name;
    int required;      /* absent from the build: fail (else skip, saying so) */
    int threads[2];    /* thread counts to run at (0: none) */
} pbackend;

/* Adding a backend is adding a line here. */
static const pbackend backends[] = {
    {"cpu", 1, {1, 2}},
    {"sim", 1, {1, 2}},   /* the simulated device (MGE_SIM_OPS=all: every op it can take) */
    {"cuda", 0, {1, 0}},
};
#define NBACK ((int)(sizeof backends / sizeof backends[0]))

/* Devices run through --device's path (lib/device.c); the kernel tables
 * "cpu" and "ref" through the executor's backend option. */
static int is_device(const char *name)
{
    return strcmp(name, "cpu") != 0 && strcmp(name, "ref") != 0;
}

/* Whether a device opens, asked once per name (opening sim starts its
 * queue thread; every case asks), and why not. */
static int device_check(const char *name, const char **why)
{
    static struct {
        const char *name;
        int ok;
        char why[1024];
    } seen[NBACK];
    int i = 0;
    while (i < NBACK && seen[i].name && strcmp(seen[i].name, name) != 0)
        i++;
    if (i == NBACK)
        return 0;
    if (!seen[i].name) {
        mge_error err = {0};
        seen[i].ok = mge_device_check(name, &err) == MGE_OK;
        snprintf(seen[i].why, sizeof seen[i].why, "%s", seen[i].ok ? "present" : err.msg);
        seen[i].name = name;
    }
    if (why)
        *why = seen[i].why;
    return seen[i].ok;
}

static int backend_present(const char *name)
{
    if (!is_device(name))
        return mge_backend_get(name) != NULL;
    return device_check(name, NULL);
}

/* Why a device is absent, for the skip line. */
static const char *absent_why(const char *name)
{
    const char *why = "not checked";
    device_check(name, &why);
    return why;
}

/* Whether backend `name` runs op on a first input of dtype dt: a kernel in
 * its table (for "ref", every registered kernel; cpu's table starts as a
 * copy of ref's, so it claims those too). */
static int backend_claims(const char *name, int op, mge_dtype dt)
{
    if (strcmp(name, "sim") == 0) {
        /* sim runs cpu's kernels on every op (MGE_SIM_OPS=all, set in
         * main), except on quantized tensors: judged here by the first
         * input; a node sim then refuses runs on the host, still checked */
        const mge_backend *c = mge_backend_cpu();
        return dt != MGE_QS8 && dt != MGE_QS32 && c->k[op][dt].run != NULL;
    }
    const mge_backend *b = mge_backend_get(name);
    return b && b->k[op][dt].run != NULL;
}

/* A kernel of the backend's own, not one inherited from ref (the summary). */
static int backend_own(const char *name, int op, mge_dtype dt)
{
    const mge_backend *b = mge_backend_get(is_device(name) ? "cpu" : name);
    return b && b->k[op][dt].run && b->k[op][dt].run != mge_backend_ref()->k[op][dt].run;
}

/* Runs g (its data: inputs[i] for g->inputs[i]) on backend `name` through
 * the executor and copies outputs outs[0..nout) into res. The run is on a
 * clone, so what ops update in place (optimizer state, running statistics)
 * starts from the same values on every backend; training-mode randomness
 * is seeded alike. */
static mge_status run_graph_on(const char *name, int threads, int training, const mge_graph *g, int nout,
                               const int *outs, const mge_tensor *const *inputs, mge_tensor *res, int *ninplace,
                               mge_error *err)
{
    mge_graph *cl = mge_graph_clone(g, err);
    if (!cl)
        return err->code;
    mge_exec_opts o = {0};
    o.threads = threads;
    if (is_device(name))
        o.device = name;
    else
        o.backend = name;
    o.noutputs = nout;
    o.outputs = outs;
    o.training = training;
    mge_exec *e = NULL;
    mge_status s = mge_exec_create(cl, &o, &e, err);
    const mge_tensor *argv[PC_MAXIN + 1];
    for (int i = 0; !s && i < mge_exec_ninputs(e); i++)
        for (int k = 0; k < cl->ninputs; k++)
            if (cl->inputs[k] == mge_exec_input(e, i))
                argv[i] = inputs[k];
    if (!s) {
        mge_exec_set_seed(e, 42);
        s = mge_exec_run(e, argv, err);
    }
    for (int i = 0; !s && i < nout; i++)
        if ((s = mge_tensor_copy(&res[i], mge_exec_result(e, i), err)))
            while (i-- > 0)
                mge_tensor_free(&res[i]);
    mge_plan_stats ps;
    if (!s && ninplace && mge_exec_stats(e, NULL, &ps, err) == MGE_OK)
        *ninplace = ps.ninplace;
    mge_exec_free(e);
    mge_graph_free(cl);
    return s;
}

/* ---------------------------------------------------------------- the table */

/* A tolerance: |got - ref| <= atol + rtol * |ref| per element; {0, 0} is
 * exact: the same bits (any NaN matches any NaN, a zero either zero).
 * Integer, bool and quantized outputs are always exact. A graph is held to
 * the loosest tolerance among the ops it runs, so helper nodes (neg,
 * to_nchwc) and the exact gradient ops of exact forward ops leave it as
 * is. f16 and bf16 outputs of inexact graphs get at least two units of
 * their last place: a backend may round intermediate values where ref
 * rounds once. Exact ops only move, select or compare values, or do
 * integer arithmetic; float arithmetic gets a tolerance even where today's
 * cpu kernels happen to match ref bit for bit. */
typedef struct ptol {
    double atol, rtol;
} ptol;

typedef struct pspec {
    pc_gen gen;        /* NULL: no cases of its own */
    int ncases;        /* per dtype */
    ptol tol;
    const char *via;   /* without gen: the forward op whose gradient graphs run it */
} pspec;

/* a row: the generator and its case count per dtype, or the forward op
 * whose gradient graphs run the op; and the tolerance */
#define CASES(gen, n, tol) {gen, n, tol, NULL}
#define VIA(op, tol) {NULL, 0, tol, op}
#define EXACT {0, 0}
/* single float operations: the correctly rounded result, give or take a
 * unit in the last place for a backend that contracts or reorders */
#define ULP {1e-7, 3e-7}
/* transcendental functions: vector approximations */
#define TRANS {1e-6, 4e-6}
/* accumulations (convs, products, reductions, norms) of inputs near 1 */
#define ACC {2e-5, 1e-4}
/* chains of transcendental functions: each multiplies the relative error
 * of its input by its condition number */
#define CHAIN {1e-5, 2e-5}
/* Winograd F(m,3): the transforms' rounding grows with the tile (m = 4) */
#define WINO {1e-4, 1e-3}

static const pspec specs[MGE_NOPS] = {
    [MGE_OP_CONV2D] = CASES(gen_conv2d, 20, ACC),
    [MGE_OP_LINEAR] = CASES(gen_linear, 16, ACC),
    [MGE_OP_MATMUL] = CASES(gen_matmul, 20, ACC),
    [MGE_OP_BATCHNORM] = CASES(gen_batchnorm, 16, ACC),
    [MGE_OP_LAYERNORM] = CASES(gen_layernorm, 16, ACC),
    [MGE_OP_RELU] = CASES(gen_unary, 12, EXACT),
    [MGE_OP_RELU6] = CASES(gen_unary, 12, EXACT),
    [MGE_OP_LEAKY_RELU] = CASES(gen_unary, 12, ULP),
    [MGE_OP_SIGMOID] = CASES(gen_unary, 12, TRANS),
    [MGE_OP_TANH] = CASES(gen_unary, 12, TRANS),
    [MGE_OP_GELU] = CASES(gen_unary, 12, TRANS),
    [MGE_OP_SILU] = CASES(gen_unary, 12, TRANS),
    [MGE_OP_HSWISH] = CASES(gen_unary, 12, ULP),
    [MGE_OP_HSIGMOID] = CASES(gen_unary, 12, ULP),
    [MGE_OP_EXP] = CASES(gen_unary, 12, TRANS),
    [MGE_OP_LOG] = CASES(gen_unary, 12, TRANS),
    [MGE_OP_SQRT] = CASES(gen_unary, 12, ULP),
    [MGE_OP_NEG] = CASES(gen_unary, 12, EXACT),
    [MGE_OP_ABS] = CASES(gen_unary, 12, EXACT),
    [MGE_OP_DROPOUT] = CASES(gen_unary, 12, ULP),
    [MGE_OP_CAST] = CASES(gen_cast, 16, EXACT),
    [MGE_OP_ADD] = CASES(gen_binary, 16, ULP),
    [MGE_OP_SUB] = CASES(gen_binary, 16, ULP),
    [MGE_OP_MUL] = CASES(gen_binary, 16, ULP),
    [MGE_OP_DIV] = CASES(gen_binary, 16, ULP),
    [MGE_OP_POW] = CASES(gen_binary, 16, TRANS),
    [MGE_OP_MAXIMUM] = CASES(gen_binary, 16, EXACT),
    [MGE_OP_MINIMUM] = CASES(gen_binary, 16, EXACT),
    [MGE_OP_MAXPOOL2D] = CASES(gen_pool, 16, EXACT),
    [MGE_OP_AVGPOOL2D] = CASES(gen_pool, 16, ACC),
    [MGE_OP_GLOBAL_AVGPOOL] = CASES(gen_pool, 12, ACC),
    [MGE_OP_SOFTMAX] = CASES(gen_softmax, 16, TRANS),
    [MGE_OP_LOG_SOFTMAX] = CASES(gen_softmax, 16, TRANS),
    [MGE_OP_SUM] = CASES(gen_reduce, 16, ACC),
    [MGE_OP_MEAN] = CASES(gen_reduce, 16, ACC),
    [MGE_OP_MAX] = CASES(gen_reduce, 16, EXACT),
    [MGE_OP_ARGMAX] = CASES(gen_reduce, 12, EXACT),
    [MGE_OP_RESHAPE] = CASES(gen_reshape, 8, EXACT),
    [MGE_OP_FLATTEN] = CASES(gen_flatten, 8, EXACT),
    [MGE_OP_TRANSPOSE] = CASES(gen_transpose, 8, EXACT),
    [MGE_OP_CONCAT] = CASES(gen_concat, 8, EXACT),
    [MGE_OP_SLICE] = CASES(gen_slice_any, 16, EXACT),
    [MGE_OP_CROSS_ENTROPY] = CASES(gen_cross_entropy, 12, ACC),
    [MGE_OP_MSE] = CASES(gen_mse, 12, ACC),
    [MGE_OP_CONV2D_GRAD_INPUT] = VIA("conv2d", ACC),
    [MGE_OP_CONV2D_GRAD_WEIGHT] = VIA("conv2d", ACC),
    [MGE_OP_LINEAR_GRAD_INPUT] = VIA("linear", ACC),
    [MGE_OP_LINEAR_GRAD_WEIGHT] = VIA("linear", ACC),
    [MGE_OP_BATCHNORM_GRAD] = VIA("batchnorm", ACC),
    [MGE_OP_LAYERNORM_GRAD] = VIA("layernorm", ACC),
    [MGE_OP_RELU_GRAD] = VIA("relu", EXACT),
    [MGE_OP_RELU6_GRAD] = VIA("relu6", EXACT),
    [MGE_OP_LEAKY_RELU_GRAD] = VIA("leaky_relu", ULP),
    [MGE_OP_SIGMOID_GRAD] = VIA("sigmoid", ULP),
    [MGE_OP_TANH_GRAD] = VIA("tanh", ULP),
    [MGE_OP_GELU_GRAD] = VIA("gelu", TRANS),
    [MGE_OP_SILU_GRAD] = VIA("silu", TRANS),
    [MGE_OP_HSWISH_GRAD] = VIA("hswish", ULP),
    [MGE_OP_HSIGMOID_GRAD] = VIA("hsigmoid", ULP),
    [MGE_OP_ABS_GRAD] = VIA("abs", EXACT),
    [MGE_OP_DROPOUT_GRAD] = VIA("dropout", ULP),
    [MGE_OP_SUM_TO] = VIA("add", ACC),
    [MGE_OP_MAXIMUM_GRAD] = VIA("maximum", EXACT),
    [MGE_OP_MINIMUM_GRAD] = VIA("minimum", EXACT),
    [MGE_OP_MAXPOOL2D_GRAD] = VIA("maxpool2d", ACC),
    [MGE_OP_AVGPOOL2D_GRAD] = VIA("avgpool2d", ACC),
    [MGE_OP_GLOBAL_AVGPOOL_GRAD] = VIA("global_avgpool", ULP),
    [MGE_OP_SUM_GRAD] = VIA("sum", EXACT),
    [MGE_OP_MEAN_GRAD] = VIA("mean", ULP),
    [MGE_OP_MAX_GRAD] = VIA("max", EXACT),
    [MGE_OP_SOFTMAX_GRAD] = VIA("softmax", ACC),
    [MGE_OP_LOG_SOFTMAX_GRAD] = VIA("log_softmax", ACC),
    [MGE_OP_RESHAPE_AS] = CASES(gen_reshape_as, 6, EXACT),
    [MGE_OP_SLICE_GRAD] = CASES(gen_slice_grad, 6, EXACT),
    [MGE_OP_CROSS_ENTROPY_GRAD] = VIA("cross_entropy", ACC),
    [MGE_OP_MSE_GRAD] = VIA("mse", ULP),
    [MGE_OP_SGD] = CASES(gen_optim, 16, ULP),
    [MGE_OP_ADAM] = CASES(gen_optim, 16, TRANS),
    [MGE_OP_SUMSQ] = CASES(gen_sumsq, 12, ACC),
    [MGE_OP_CLIP_COEF] = CASES(gen_sumsq, 12, ACC),
    [MGE_OP_FUSED_CONV2D] = CASES(gen_fused_conv2d, 20, ACC),
    [MGE_OP_FUSED_LINEAR] = CASES(gen_fused_linear, 16, ACC),
    [MGE_OP_FUSED_ELEMWISE] = CASES(gen_fused_elemwise, 24, CHAIN),
    [MGE_OP_CONV2D_WINOGRAD] = CASES(gen_conv2d_winograd, 16, WINO),
    [MGE_OP_WINOGRAD_WEIGHT] = CASES(gen_winograd_weight, 8, ULP),
    [MGE_OP_CONV2D_WINOGRAD_NCHWC] = CASES(gen_conv2d_winograd, 16, WINO),
    [MGE_OP_WINOGRAD_WEIGHT_NCHWC] = CASES(gen_winograd_weight, 8, ULP),
    [MGE_OP_TO_NCHWC] = CASES(gen_to_nchwc, 8, EXACT),
    [MGE_OP_FROM_NCHWC] = CASES(gen_from_nchwc, 8, EXACT),
    [MGE_OP_CONV2D_NCHWC] = CASES(gen_conv2d_nchwc, 20, ACC),
    [MGE_OP_MAXPOOL2D_NCHWC] = CASES(gen_maxpool2d_nchwc, 12, EXACT),
    [MGE_OP_QUANTIZE] = CASES(gen_quantize, 8, EXACT),
    [MGE_OP_DEQUANTIZE] = CASES(gen_quantize, 8, EXACT),
    [MGE_OP_QCONV2D] = CASES(gen_qlayer, 20, EXACT),
    [MGE_OP_QLINEAR] = CASES(gen_qlayer, 12, EXACT),
    [MGE_OP_QADD] = CASES(gen_qadd, 8, EXACT),
    [MGE_OP_COPY] = CASES(gen_copy, 6, EXACT),
    [MGE_OP_GATHER] = CASES(gen_gather, 10, EXACT),
    [MGE_OP_INDEX_SELECT] = CASES(gen_gather, 8, EXACT),
    [MGE_OP_GATHER_ELEMENTS] = CASES(gen_elements, 12, EXACT),
    [MGE_OP_SCATTER] = CASES(gen_elements, 12, EXACT),
    [MGE_OP_SCATTER_ND] = CASES(gen_scatter_nd, 12, EXACT),
    [MGE_OP_ONE_HOT] = CASES(gen_one_hot, 12, EXACT),
    [MGE_OP_GATHER_GRAD] = VIA("gather", ACC),
    [MGE_OP_GATHER_ELEMENTS_GRAD] = VIA("gather_elements", ACC),
    [MGE_OP_WHERE] = CASES(gen_where, 16, EXACT),
    [MGE_OP_EQUAL] = CASES(gen_compare, 10, EXACT),
    [MGE_OP_LESS] = CASES(gen_compare, 10, EXACT),
    [MGE_OP_GREATER] = CASES(gen_compare, 10, EXACT),
    [MGE_OP_LESS_EQUAL] = CASES(gen_compare, 10, EXACT),
    [MGE_OP_GREATER_EQUAL] = CASES(gen_compare, 10, EXACT),
    [MGE_OP_NOT] = CASES(gen_compare, 12, EXACT),
    [MGE_OP_AND] = CASES(gen_compare, 12, EXACT),
    [MGE_OP_OR] = CASES(gen_compare, 12, EXACT),
    [MGE_OP_XOR] = CASES(gen_compare, 12, EXACT),
    [MGE_OP_SHAPE] = CASES(gen_shape_of, 4, EXACT),
    [MGE_OP_SIZE] = CASES(gen_shape_of, 4, EXACT),
    [MGE_OP_EXPAND] = CASES(gen_expand_tile, 10, EXACT),
    [MGE_OP_TILE] = CASES(gen_expand_tile, 10, EXACT),
    [MGE_OP_SQUEEZE] = CASES(gen_squeeze, 6, EXACT),
    [MGE_OP_UNSQUEEZE] = CASES(gen_squeeze, 6, EXACT),
    [MGE_OP_SPLIT] = CASES(gen_split, 10, EXACT),
    [MGE_OP_RANGE] = CASES(gen_range, 6, EXACT),
    [MGE_OP_CONSTANT_OF_SHAPE] = CASES(gen_constant_of_shape, 6, EXACT),
    [MGE_OP_TILE_GRAD] = VIA("tile", ACC),
    /* transposed and 1-D conv, adaptive pooling (group conv) */
    [MGE_OP_CONV_TRANSPOSE2D] = CASES(gen_conv_transpose2d, 20, ACC),
    [MGE_OP_CONV1D] = CASES(gen_conv1d, 16, ACC),
    [MGE_OP_ADAPTIVE_AVGPOOL2D] = CASES(gen_adaptive_pool, 12, ACC),
    [MGE_OP_ADAPTIVE_MAXPOOL2D] = CASES(gen_adaptive_pool, 12, EXACT),
    [MGE_OP_ADAPTIVE_AVGPOOL1D] = CASES(gen_adaptive_pool, 10, ACC),
    [MGE_OP_ADAPTIVE_MAXPOOL1D] = CASES(gen_adaptive_pool, 10, EXACT),
    [MGE_OP_CONV_TRANSPOSE2D_GRAD_INPUT] = VIA("conv_transpose2d", ACC),
    [MGE_OP_CONV_TRANSPOSE2D_GRAD_WEIGHT] = VIA("conv_transpose2d", ACC),
    [MGE_OP_CONV1D_GRAD_INPUT] = VIA("conv1d", ACC),
    [MGE_OP_CONV1D_GRAD_WEIGHT] = VIA("conv1d", ACC),
    [MGE_OP_ADAPTIVE_AVGPOOL2D_GRAD] = VIA("adaptive_avgpool2d", ACC),
    [MGE_OP_ADAPTIVE_MAXPOOL2D_GRAD] = VIA("adaptive_maxpool2d", ACC),
    [MGE_OP_ADAPTIVE_AVGPOOL1D_GRAD] = VIA("adaptive_avgpool1d", ACC),
    [MGE_OP_ADAPTIVE_MAXPOOL1D_GRAD] = VIA("adaptive_maxpool1d", ACC),
    [MGE_OP_CONV3D] = CASES(gen_conv3d, 16, ACC),
    [MGE_OP_CONV3D_GRAD_INPUT] = VIA("conv3d", ACC),
    [MGE_OP_CONV3D_GRAD_WEIGHT] = VIA("conv3d", ACC),
    [MGE_OP_LSTM] = CASES(gen_rnn, 12, ACC),
    [MGE_OP_GRU] = CASES(gen_rnn, 12, ACC),
    [MGE_OP_LSTM_GRAD] = VIA("lstm", ACC),
    [MGE_OP_GRU_GRAD] = VIA("gru", ACC),
    /* nn: 3-D pools, max_unpool, rnn */
    [MGE_OP_MAXPOOL3D] = CASES(gen_pool3d, 16, EXACT),
    [MGE_OP_AVGPOOL3D] = CASES(gen_pool3d, 16, ACC),
    [MGE_OP_MAXPOOL3D_GRAD] = VIA("maxpool3d", ACC),
    [MGE_OP_AVGPOOL3D_GRAD] = VIA("avgpool3d", ACC),
    [MGE_OP_MAX_UNPOOL] = CASES(gen_max_unpool, 12, EXACT),
    [MGE_OP_RNN] = CASES(gen_rnn, 12, ACC),
    /* spatial */
    [MGE_OP_RESIZE] = CASES(gen_resize, 16, ACC),
    [MGE_OP_PAD] = CASES(gen_pad, 12, EXACT),
    [MGE_OP_GROUP_NORM] = CASES(gen_gnorm, 12, ACC),
    [MGE_OP_INSTANCE_NORM] = CASES(gen_gnorm, 10, ACC),
    [MGE_OP_RMS_NORM] = CASES(gen_gnorm, 10, ACC),
    [MGE_OP_RESIZE_GRAD] = VIA("resize", ACC),
    [MGE_OP_PAD_GRAD] = VIA("pad", ACC),
    [MGE_OP_GROUP_NORM_GRAD] = VIA("group_norm", ACC),
    [MGE_OP_RMS_NORM_GRAD] = VIA("rms_norm", ACC),
    /* gpt group */
    [MGE_OP_PROD] = CASES(gen_reduce_more, 12, ACC),
    [MGE_OP_MIN] = CASES(gen_reduce_more, 12, EXACT),
    [MGE_OP_ARGMIN] = CASES(gen_reduce_more, 10, EXACT),
    [MGE_OP_PROD_GRAD] = VIA("prod", ACC),
    [MGE_OP_TOPK] = CASES(gen_sort, 16, EXACT),
    [MGE_OP_SORT] = CASES(gen_sort, 12, EXACT),
    [MGE_OP_ARGSORT] = CASES(gen_sort, 10, EXACT),
    [MGE_OP_CUMSUM] = CASES(gen_cumsum, 12, ACC),
    [MGE_OP_EMBEDDING] = CASES(gen_embedding, 10, EXACT),
    [MGE_OP_SDPA] = CASES(gen_sdpa, 20, ACC),
    [MGE_OP_SDPA_GRAD] = VIA("scaled_dot_product_attention", ACC),
    /* elementwise math (group elem) */
    [MGE_OP_CLAMP] = CASES(gen_elem_math, 12, EXACT),
    [MGE_OP_HARDTANH] = CASES(gen_elem_math, 12, EXACT),
    [MGE_OP_SOFTPLUS] = CASES(gen_elem_math, 12, TRANS),
    [MGE_OP_ELU] = CASES(gen_elem_math, 12, TRANS),
    [MGE_OP_SELU] = CASES(gen_elem_math, 12, TRANS),
    [MGE_OP_MISH] = CASES(gen_elem_math, 12, TRANS),
    [MGE_OP_SOFTSIGN] = CASES(gen_elem_math, 12, ULP),
    [MGE_OP_ERF] = CASES(gen_elem_math, 12, TRANS),
    [MGE_OP_RSQRT] = CASES(gen_elem_math, 12, ULP),
    [MGE_OP_RECIPROCAL] = CASES(gen_elem_math, 12, ULP),
    [MGE_OP_SQUARE] = CASES(gen_elem_math, 12, ULP),
    [MGE_OP_SIN] = CASES(gen_elem_math, 12, TRANS),
    [MGE_OP_COS] = CASES(gen_elem_math, 12, TRANS),
    [MGE_OP_FLOOR] = CASES(gen_elem_math, 12, EXACT),
    [MGE_OP_CEIL] = CASES(gen_elem_math, 12, EXACT),
    [MGE_OP_ROUND] = CASES(gen_elem_math, 12, EXACT),
    [MGE_OP_SIGN] = CASES(gen_elem_math, 12, EXACT),
    [MGE_OP_ISNAN] = CASES(gen_elem_math, 8, EXACT),
    [MGE_OP_ISINF] = CASES(gen_elem_math, 8, EXACT),
    [MGE_OP_PRELU] = CASES(gen_prelu, 12, ACC),
    [MGE_OP_UNARY_GRAD] = VIA("elu", TRANS) /* and every other table op since clamp */,
    [MGE_OP_PRELU_GRAD] = VIA("prelu", ACC),
    /* extra math (area math) */
    [MGE_OP_ACOS] = CASES(gen_elem_math, 12, TRANS),
    [MGE_OP_ACOSH] = CASES(gen_elem_math, 12, TRANS),
    [MGE_OP_ASIN] = CASES(gen_elem_math, 12, TRANS),
    [MGE_OP_ASINH] = CASES(gen_elem_math, 12, TRANS),
    [MGE_OP_ATAN] = CASES(gen_elem_math, 12, TRANS),
    [MGE_OP_ATANH] = CASES(gen_elem_math, 12, TRANS),
    [MGE_OP_COSH] = CASES(gen_elem_math, 12, TRANS),
    [MGE_OP_SINH] = CASES(gen_elem_math, 12, TRANS),
    [MGE_OP_SHRINK] = CASES(gen_elem_math, 12, EXACT),
    [MGE_OP_BITWISE_AND] = CASES(gen_bitwise, 10, EXACT),
    [MGE_OP_BITWISE_OR] = CASES(gen_bitwise, 10, EXACT),
    [MGE_OP_BITWISE_XOR] = CASES(gen_bitwise, 10, EXACT),
    [MGE_OP_BITWISE_NOT] = CASES(gen_bitwise, 10, EXACT),
    [MGE_OP_SHIFT_LEFT] = CASES(gen_bitwise, 10, EXACT),
    [MGE_OP_SHIFT_RIGHT] = CASES(gen_bitwise, 10, EXACT),
    [MGE_OP_DET] = CASES(gen_det, 12, ACC),
    [MGE_OP_EYE_LIKE] = CASES(gen_eye_like, 8, EXACT),
    [MGE_OP_LRN] = CASES(gen_lrn, 12, ACC),
    [MGE_OP_DFT] = CASES(gen_dft, 12, ACC),
    [MGE_OP_DET_GRAD] = VIA("det", ACC),
    [MGE_OP_LRN_GRAD] = VIA("lrn", ACC),
    [MGE_OP_DFT_GRAD] = VIA("dft", ACC),
    /* spatial sampling */
    [MGE_OP_GRID_SAMPLE] = CASES(gen_grid_sample, 16, ACC),
    [MGE_OP_GRID_SAMPLE_GRAD] = VIA("grid_sample", ACC),
    [MGE_OP_ROI_ALIGN] = CASES(gen_roi_align, 12, ACC),
    [MGE_OP_ROI_ALIGN_GRAD] = VIA("roi_align", ACC),
    [MGE_OP_DEFORM_CONV2D] = CASES(gen_deform_conv2d, 12, ACC),
    /* ONNX linear quantization (group quant-onnx) */
    [MGE_OP_QUANTIZE_LINEAR] = CASES(gen_quantize_linear, 12, EXACT),
    [MGE_OP_DEQUANTIZE_LINEAR] = CASES(gen_dequantize_linear, 12, EXACT),
    [MGE_OP_REQUANTIZE] = CASES(gen_requantize, 10, EXACT),
    [MGE_OP_MATMUL_INTEGER] = CASES(gen_matmul_integer, 16, EXACT),
    [MGE_OP_CONV_INTEGER] = CASES(gen_conv_integer, 16, EXACT),
    [MGE_OP_DEFORM_CONV2D_GRAD] = VIA("deform_conv2d", ACC),
};

/* Op x dtype pairs some backend claims that no compared graph runs, and
 * why (dt -1: every dtype). */
static const struct {
    int op, dt;
    const char *why;
} not_covered[] = {
    /* the kernel is looked up by the first input's dtype, here dy, which
     * op_loss.c requires to be f32 (the loss is f32 whatever the logits):
     * ref_grad_elem.c's f16/bf16 entries can never be reached; the f32
     * kernel handles f16/bf16 logits (the f16 gradient graphs run it) */
    {MGE_OP_CROSS_ENTROPY_GRAD, MGE_F16, "unreachable: dy is always f32"},
    {MGE_OP_CROSS_ENTROPY_GRAD, MGE_BF16, "unreachable: dy is always f32"},
    {MGE_OP_MSE_GRAD, MGE_F16, "unreachable: dy is always f32"},
    {MGE_OP_MSE_GRAD, MGE_BF16, "unreachable: dy is always f32"},
    {MGE_OP_CROSS_ENTROPY_GRAD, MGE_F64, "unreachable: dy is always f32"},
    {MGE_OP_MSE_GRAD, MGE_F64, "unreachable: dy is always f32"},
    /* distributed: they need the ranks of a job (a communicator); the
     * parity is with one process, checked by tests/cli/train_mpi.bats */
    {MGE_OP_ALLREDUCE, -1, "needs a communicator: tests/cli/train_mpi.bats"},
    {MGE_OP_ALLREDUCE_WAIT, -1, "needs a communicator: tests/cli/train_mpi.bats"},
    {MGE_OP_SYNC_BATCHNORM, -1, "needs a communicator: tests/cli/train_mpi.bats"},
    {MGE_OP_SYNC_BATCHNORM_GRAD, -1, "needs a communicator: tests/cli/train_mpi.bats"},
    {-1, -1, NULL},
};

/* Mismatches known and not fixed yet: reported at every run, not failed. */
static const struct {
    const char *backend;
    int op, dt;
    const char *what;
} known_failures[] = {
    {NULL, -1, -1, NULL},
};

static const char *why_not_covered(int op, int dt)
{
    for (size_t i = 0; not_covered[i].why; i++)
        if (not_covered[i].op == op && (not_covered[i].dt == dt || not_covered[i].dt < 0))
            return not_covered[i].why;
    return NULL;
}

static const char *known_failure(const char *backend, int op, int dt)
{
    for (size_t i = 0; known_failures[i].what; i++)
        if (known_failures[i].op == op && known_failures[i].dt == dt && !strcmp(known_failures[i].backend, backend))
            return known_failures[i].what;
    return NULL;
}

/* ---------------------------------------------------------------- run state */

typedef struct pstat {
    int fwd, grad, fails, inplace;   /* inplace: runs where the planner reused an input's buffer */
    double maxabs, ratio;   /* largest |got - ref|; largest share of the tolerance */
} pstat;

static pstat stats[NBACK][MGE_NOPS][MGE_NDTYPES];
static int ran[NBACK][MGE_NOPS][MGE_NDTYPES];   /* nodes of op x dtype in compared graphs */
static int nodt[MGE_NOPS][MGE_NDTYPES];         /* the generator cannot make the dtype */
static int nograd[MGE_NOPS];                    /* cases whose op has no gradient rule */
static uint64_t seed = 20261205;
static int verbose, nknown, scale = 1;
static const char *only_op;

static void print_graph(const mge_graph *g)
{
    mge_buf b = {0};
    mge_error err;
    if (mge_text_print(g, &b, &err) == MGE_OK && b.p)
        fprintf(stderr, "  graph:\n%.*s", (int)(b.n < 6000 ? b.n : 6000), b.p);
    mge_buf_free(&b);
}

/* Element i of a float tensor as a double. */
static double ldf(const mge_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case MGE_F32: return ((const float *)t->data)[i];
    case MGE_F16: return mge_f16_to_f32(((const uint16_t *)t->data)[i]);
    case MGE_BF16: return mge_bf16_to_f32(((const uint16_t *)t->data)[i]);
    case MGE_F64: return ((const double *)t->data)[i];
    default: return 0;
    }
}

/* got against want under tolerance tol; on a mismatch, why says where. */
static int compare(const mge_tensor *got, const mge_tensor *want, ptol tol, pstat *st, char *why, size_t nwhy)
{
    char bg[96], bw[96];
    if (got->dtype != want->dtype || !mge_tensor_same_shape(got, want)) {
        snprintf(why, nwhy, "got %s, ref %s", mge_shape_str(got->dtype, got->ndim, got->dims, bg, sizeof bg),
                 mge_shape_str(want->dtype, want->ndim, want->dims, bw, sizeof bw));
        return 0;
    }
    int64_t n = mge_tensor_numel(want);
    size_t es = mge_dtype_size(want->dtype);
    if (!is_float(want->dtype)) {
        for (int64_t i = 0; i < n; i++)
            if (memcmp((const char *)got->data + i * es, (const char *)want->data + i * es, es)) {
                int64_t a = 0, b = 0;
                memcpy(&a, (const char *)got->data + i * es, es);
                memcpy(&b, (const char *)want->data + i * es, es);
                if (es < 8 && want->dtype != MGE_U8 && want->dtype != MGE_U16 && want->dtype != MGE_U32 &&
                    want->dtype != MGE_BOOL) {   /* sign-extend */
                    a = (a << (64 - 8 * es)) >> (64 - 8 * es);
                    b = (b << (64 - 8 * es)) >> (64 - 8 * es);
                }
                snprintf(why, nwhy, "element %lld of %lld: got %lld, ref %lld", (long long)i, (long long)n,
                         (long long)a, (long long)b);
                return 0;
            }
        if (want->q.nscale != got->q.nscale ||
            (want->q.nscale && memcmp(want->q.scale, got->q.scale, sizeof(float) * (size_t)want->q.nscale))) {
            snprintf(why, nwhy, "quantization scales differ");
            return 0;
        }
        return 1;
    }
    int exact = tol.atol == 0 && tol.rtol == 0;
    if (!exact && want->dtype != MGE_F32) {
        double u = want->dtype == MGE_F16 ? 0x1p-10 : 0x1p-7;
        tol.atol = fmax(tol.atol, 2 * u), tol.rtol = fmax(tol.rtol, 2 * u);
    }
    for (int64_t i = 0; i < n; i++) {
        double a = ldf(got, i), b = ldf(want, i);
        if (isnan(a) && isnan(b))
            continue;
        int ok;
        double d = fabs(a - b);
        if (exact)   /* the same bits; zeros of either sign match (IEEE leaves max(-0, +0) open) */
            ok = !memcmp((const char *)got->data + i * es, (const char *)want->data + i * es, es) || (a == 0 && b == 0);
        else if (isinf(b) || isinf(a) || isnan(a) || isnan(b))
            ok = a == b;
        else {
            double lim = tol.atol + tol.rtol * fabs(b);
            ok = d <= lim;
            st->maxabs = fmax(st->maxabs, d);
            st->ratio = fmax(st->ratio, d / lim);
        }
        if (!ok) {
            snprintf(why, nwhy, "element %lld of %lld: got %.9g, ref %.9g (|diff| %.3g, tolerance %.3g + %.3g*|ref|)",
                     (long long)i, (long long)n, a, b, d, tol.atol, tol.rtol);
            return 0;
        }
    }
    return 1;
}

/* The loosest tolerance among the nodes that computing outs runs. */
static ptol graph_tol(const mge_graph *g, int nout, const int *outs, char *need)
{
    mge_graph_needed(g, nout, outs, need, NULL);
    ptol t = EXACT;
    for (int i = 0; i < g->nnodes; i++)
        if (need[i]) {
            t.atol = fmax(t.atol, specs[g->nodes[i].op].tol.atol);
            t.rtol = fmax(t.rtol, specs[g->nodes[i].op].tol.rtol);
        }
    return t;
}

/* ---------------------------------------------------------------- one case */

typedef struct prun {
    const pcase *c;
    int k;                 /* case index */
    const char *kind;      /* "forward" or "gradient" */
} prun;

static void fail_header(const prun *p, const char *backend, int threads)
{
    const pcase *c = p->c;
    fprintf(stderr, "parity: FAIL %s %s, %s graph of case %d%s, on %s (threads %d), seed %llu\n",
            mge_op_info(c->op)->name, mge_dtype_name(c->dt), p->kind, p->k, c->training ? " (training)" : "", backend,
            threads, (unsigned long long)seed);
}

/* Runs g (outputs outs, data ins) on ref and on every backend present that
 * claims the case's op x dtype, comparing outputs; counts the nodes run. */
static void compare_graph(const prun *p, const mge_graph *g, int nout, const int *outs, const mge_tensor *const *ins,
                          int grad)
{
    const pcase *c = p->c;
    mge_error err;
    mge_error_clear(&err);
    mge_tensor want[PC_MAXIN], got[PC_MAXIN];
    char *need = calloc((size_t)g->nnodes + 1, 1);
    ptol tol = graph_tol(g, nout, outs, need);
    mge_status s = run_graph_on("ref", 1, c->training || grad, g, nout, outs, ins, want, NULL, &err);
    if (s) {
        fail_header(p, "ref", 1);
        fprintf(stderr, "  ref failed: %s\n", err.msg);
        print_graph(g);
        CHECK(0);
        free(need);
        return;
    }
    for (int b = 0; b < NBACK; b++) {
        const char *bn = backends[b].name;
        if (!backend_present(bn) || !backend_claims(bn, c->op, c->dt))
            continue;
        for (int ti = 0; ti < 2 && backends[b].threads[ti]; ti++) {
            int th = backends[b].threads[ti];
            pstat *st = &stats[b][c->op][c->dt];
            *(grad ? &st->grad : &st->fwd) += 1;
            for (int i = 0; i < g->nnodes; i++)
                if (need[i]) {
                    const mge_node *n = &g->nodes[i];
                    ran[b][n->op][n->nin ? g->values[n->in[0]].dtype : MGE_F32]++;
                }
            int nip = 0;
            s = run_graph_on(bn, th, c->training || grad, g, nout, outs, ins, got, &nip, &err);
            st->inplace += nip > 0;
            char why[1200];
            int ok = 1, bad = -1;
            if (s)
                snprintf(why, sizeof why, "run failed: %s", err.msg), ok = 0;
            for (int i = 0; !s && i < nout; i++) {
                if (ok && !compare(&got[i], &want[i], tol, st, why, sizeof why))
                    ok = 0, bad = i;
                mge_tensor_free(&got[i]);
            }
            if (ok)
                continue;
            st->fails++;
            const char *known = known_failure(bn, c->op, c->dt);
            fail_header(p, bn, th);
            if (bad >= 0)
                fprintf(stderr, "  output %d ('%s', made by %s): %s\n", bad, g->values[outs[bad]].name,
                        g->values[outs[bad]].producer >= 0
                            ? mge_op_info(g->nodes[g->values[outs[bad]].producer].op)->name
                            : "the run, in place",
                        why);
            else
                fprintf(stderr, "  %s\n", why);
            print_graph(g);
            if (known)
                fprintf(stderr, "  (a known failure: %s)\n", known), nknown++;
            else
                CHECK(0);
        }
    }
    for (int i = 0; i < nout; i++)
        mge_tensor_free(&want[i]);
    free(need);
}

/* The gradient graph of case c: d(output 0) = dy, a random input; the
 * gradients of every float graph input and param are compared. */
static void compare_gradient(const prun *p)
{
    const pcase *c = p->c;
    const mge_value *yv = &c->g->values[c->outs[0]];
    if (!is_float(yv->dtype) || c->nograd)
        return;
    mge_error err;
    mge_error_clear(&err);
    mge_graph *g = mge_graph_clone(c->g, &err);
    CHECK_MSG(g, "%s", err.msg);
    if (!g)
        return;
    int dy = mge_graph_add_value(g, "parity.dy", MGE_VAL_INPUT, yv->dtype, yv->ndim, yv->dims, &err);
    int wrt[PC_MAXIN * 2], grads[PC_MAXIN * 2], nwrt = 0, outs[PC_MAXOUT], nout = 0;
    for (int v = 0; v < g->nvalues && nwrt < PC_MAXIN * 2; v++)
        if (v != dy && (g->values[v].kind == MGE_VAL_INPUT || g->values[v].kind == MGE_VAL_PARAM) &&
            is_float(g->values[v].dtype))
            wrt[nwrt++] = v;
    mge_status s = dy < 0 ? MGE_ERR_INVALID : mge_grad_build_from(g, c->outs[0], dy, nwrt, wrt, grads, &err);
    if (s == MGE_ERR_UNSUPPORTED) {   /* no gradient rule */
        nograd[c->op]++;
        mge_graph_free(g);
        return;
    }
    CHECK_MSG(s == MGE_OK, "%s %s: gradient graph: %s", mge_op_info(c->op)->name, mge_dtype_name(c->dt), err.msg);
    for (int i = 0; !s && i < nwrt && nout < PC_MAXOUT; i++)
        if (grads[i] >= 0)
            outs[nout++] = grads[i];
    if (!s && nout) {
        /* data: the case's inputs, then dy */
        mge_tensor dyt;
        pcase dr;   /* only its generator: dy's data */
        mge_rng_seed(&dr.r, seed ^ (uint64_t)p->k * 0x5bd1e995u ^ (uint64_t)c->op << 32);
        CHECK_OK(mge_tensor_alloc(&dyt, yv->dtype, yv->ndim, yv->dims, &err), err);
        pc_fill(&dr, &dyt, -1, 1);
        const mge_tensor *ins[PC_MAXIN + 1];
        CHECK(g->ninputs == c->nin + 1);   /* the rules add no graph inputs */
        for (int i = 0; i < g->ninputs && i <= c->nin; i++)
            ins[i] = g->inputs[i] == dy ? &dyt : &c->in[i];
        prun q = *p;
        q.kind = "gradient";
        compare_graph(&q, g, nout, outs, ins, 1);
        mge_tensor_free(&dyt);
    }
    mge_graph_free(g);
}

static void pcase_free(pcase *c)
{
    for (int i = 0; i < c->nin; i++)
        mge_tensor_free(&c->in[i]);
    mge_graph_free(c->g);
    memset(c, 0, sizeof *c);
}

/* Case k of op x dt: drawn again (up to 60 times) while the graph refuses
 * the geometry; its own seed, so a case does not depend on the others. */
static int make_case(pcase *c, int op, mge_dtype dt, int k)
{
    for (int attempt = 0; attempt < 60; attempt++) {
        memset(c, 0, sizeof *c);
        c->g = mge_graph_new();
        c->op = op;
        c->dt = dt;
        c->variant = k;
        mge_rng_seed(&c->r, seed * 0x9e3779b97f4a7c15ull + mge_hash_str(mge_op_info(op)->name) * 31 +
                                (uint64_t)dt * 1000003u + (uint64_t)k * 7919u + (uint64_t)attempt * 104729u);
        int st = specs[op].gen(c);
        if (st == PC_OK && c->nout > 0)
            return PC_OK;
        pcase_free(c);
        if (st == PC_NODT)
            return PC_NODT;
    }
    return PC_RETRY;
}

/* Whether some backend (ref included) claims op x dt. */
static int claimed(int op, int dt)
{
    if (backend_claims("ref", op, (mge_dtype)dt))
        return 1;
    for (int b = 0; b < NBACK; b++)
        if (backend_claims(backends[b].name, op, (mge_dtype)dt))
            return 1;
    return 0;
}

static void test_ops(void)
{
    for (int op = 0; op < MGE_NOPS; op++) {
        const pspec *sp = &specs[op];
        if (!sp->gen || (only_op && strcmp(only_op, mge_op_info(op)->name)))
            continue;
        for (int dt = 0; dt < MGE_NDTYPES; dt++) {
            if (!claimed(op, dt))
                continue;
            CHECK_MSG(backend_claims("ref", op, (mge_dtype)dt), "%s %s: claimed, but ref (the oracle) has no kernel",
                      mge_op_info(op)->name, mge_dtype_name((mge_dtype)dt));
            for (int k = 0; k < sp->ncases * scale; k++) {
                pcase c;
                int st = make_case(&c, op, (mge_dtype)dt, k);
                if (st == PC_NODT) {
                    nodt[op][dt] = 1;
                    break;
                }
                CHECK_MSG(st == PC_OK, "%s %s case %d: the generator found no valid case", mge_op_info(op)->name,
                          mge_dtype_name((mge_dtype)dt), k);
                if (st != PC_OK)
                    continue;
                prun p = {&c, k, "forward"};
                const mge_tensor *ins[PC_MAXIN];
                for (int i = 0; i < c.nin; i++)
                    ins[i] = &c.in[i];
                compare_graph(&p, c.g, c.nout, c.outs, ins, 0);
                compare_gradient(&p);
                pcase_free(&c);
            }
        }
    }
}

/* ---------------------------------------------------------------- coverage and summary */

static void test_coverage(void)
{
    if (only_op)
        return;
    for (int op = 0; op < MGE_NOPS; op++) {
        const pspec *sp = &specs[op];
        const char *name = mge_op_info(op)->name;
        int listed = why_not_covered(op, -1) != NULL;
        CHECK_MSG(sp->gen || sp->via || listed,
                  "op %s has no case generator, no 'via' entry and no not_covered entry in test_parity.c", name);
        CHECK_MSG(!sp->via || mge_op_lookup(sp->via, strlen(sp->via)) >= 0, "op %s: via '%s' is no op", name,
                  sp->via ? sp->via : "");
        for (int b = 0; b < NBACK; b++) {
            const char *bn = backends[b].name;
            if (!backend_present(bn))
                continue;
            for (int dt = 0; dt < MGE_NDTYPES; dt++) {
                if (!backend_claims(bn, op, (mge_dtype)dt) || ran[b][op][dt] || why_not_covered(op, dt))
                    continue;
                const char *how = sp->gen ? (nodt[op][dt] ? "its generator cannot make this dtype" : "no case ran")
                                          : "the gradient graphs never ran it";
                CHECK_MSG(0, "%s claims %s %s, but no compared graph ran it (%s%s%s)", bn, name,
                          mge_dtype_name((mge_dtype)dt), how, sp->via ? ", via " : "", sp->via ? sp->via : "");
            }
        }
    }
}

static void summary(void)
{
    for (int i = 0; known_failures[i].what; i++)
        printf("parity: known failure: %s %s %s: %s\n", known_failures[i].backend,
               mge_op_info(known_failures[i].op)->name, mge_dtype_name((mge_dtype)known_failures[i].dt),
               known_failures[i].what);
    for (int i = 0; not_covered[i].why; i++)
        printf("parity: not covered: %s %s: %s\n", mge_op_info(not_covered[i].op)->name,
               not_covered[i].dt < 0 ? "(all dtypes)" : mge_dtype_name((mge_dtype)not_covered[i].dt),
               not_covered[i].why);
    for (int b = 0; b < NBACK; b++) {
        const char *bn = backends[b].name;
        if (!backend_present(bn)) {
            printf("parity: %s: skipped: %s\n", bn, absent_why(bn));
            CHECK_MSG(!backends[b].required, "backend %s is required but absent", bn);
            continue;
        }
        int claims = 0, own = 0, fwd = 0, grad = 0, fails = 0;
        for (int op = 0; op < MGE_NOPS; op++)
            for (int dt = 0; dt < MGE_NDTYPES; dt++) {
                const pstat *st = &stats[b][op][dt];
                claims += backend_claims(bn, op, (mge_dtype)dt);
                own += backend_own(bn, op, (mge_dtype)dt);
                fwd += st->fwd, grad += st->grad, fails += st->fails;
                if (verbose && (st->fwd || st->grad))
                    printf("parity: %s: %-21s %-4s %3d forward %3d gradient %3d in place  max |err| %.2g, "
                           "%.0f%% of tolerance%s\n",
                           bn, mge_op_info(op)->name, mge_dtype_name((mge_dtype)dt), st->fwd, st->grad, st->inplace,
                           st->maxabs, 100 * st->ratio, st->fails ? "  FAILED" : "");
                else if (verbose && ran[b][op][dt])
                    printf("parity: %s: %-21s %-4s ran %d times in the graphs of other ops%s%s\n", bn,
                           mge_op_info(op)->name, mge_dtype_name((mge_dtype)dt), ran[b][op][dt],
                           specs[op].via ? ", e.g. the gradient graphs of " : "", specs[op].via ? specs[op].via : "");
            }
        printf("parity: %s (threads", bn);
        for (int ti = 0; ti < 2 && backends[b].threads[ti]; ti++)
            printf(" %d", backends[b].threads[ti]);
        printf("): %d op x dtype claimed (%d own kernels), %d forward and %d gradient runs against ref, "
               "%d mismatches\n",
               claims, own, fwd, grad, fails);
    }
    if (nknown)
        printf("parity: %d runs failed as known failures\n", nknown);
    int ng = 0;
    for (int op = 0; op < MGE_NOPS; op++)
        ng += nograd[op] > 0;
    if (verbose)
        printf("parity: %d ops with cases have no gradient rule (forward only)\n", ng);
}

int main(int argc, char **argv)
{
    setenv("MGE_SIM_OPS", "all", 1);
    const char *s = getenv("PARITY_SEED");
    if (s && *s)
        seed = strtoull(s, NULL, 0);
    s = getenv("PARITY_VERBOSE");
    verbose = (s && *s && strcmp(s, "0")) || (argc > 1 && !strcmp(argv[1], "-v"));
    only_op = getenv("PARITY_OP");
    s = getenv("PARITY_CASES");
    if (s && atoi(s) > 0)
        scale = atoi(s);
    if (only_op && mge_op_lookup(only_op, strlen(only_op)) < 0) {
        fprintf(stderr, "test_parity: PARITY_OP=%s: no such op\n", only_op);
        return 2;
    }
    const char *isa = getenv("MGE_CPU_ISA");
    printf("parity: seed %llu%s%s\n", (unsigned long long)seed, isa ? ", MGE_CPU_ISA=" : "", isa ? isa : "");
    clock_t t0 = clock();
    RUN(test_ops);
    RUN(test_coverage);
    summary();
    printf("parity: %.1f s of CPU time\n", (double)(clock() - t0) / CLOCKS_PER_SEC);
    if (unit_fail)
        printf("parity: failed with seed %llu (PARITY_SEED=%llu reproduces)\n", (unsigned long long)seed,
               (unsigned long long)seed);
    return unit_rerun_baseline(argv, "test_parity", unit_done());
}
