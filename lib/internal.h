/* internal.h — what the library's own files share and tools do not see:
 * op family hooks, the kernel interface, backends and the thread pool. */
#ifndef MGE_INTERNAL_H
#define MGE_INTERNAL_H

#include "mge.h"
#include "kshared.h"

/* A dtype and a concrete (or template) shape; for small tensors whose
 * values are known when planning (consts, shapes, what ops compute from
 * them), known = 1 and val holds the elements (integers are exact). Ops
 * that take a shape or bounds as an input read them from val; ops that
 * compute such tensors fill val. Callers zero outputs before infer. */
#define MGE_TDESC_NVAL 16
typedef struct mge_tdesc {
    mge_dtype dtype;
    int ndim;
    int64_t dims[MGE_MAX_DIMS];
    int known;
    double val[MGE_TDESC_NVAL];
} mge_tdesc;

/* ---------------------------------------------------------------- op families
 * Each lib/op_<family>.c defines, for all ops of its family:
 *   infer:  output dtypes/shapes from inputs (concrete shapes; the graph fits
 *           symbolic templates from probes, lib/graph_shapes.c),
 *   flops:  floating-point operations (a multiply-add counts 2),
 *   params: for MGE_OPF_LAYER ops, the parameters to create, given x.
 */
typedef mge_status (*mge_infer_fn)(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err);
typedef double (*mge_flops_fn)(const mge_node *n, const mge_tdesc *in, const mge_tdesc *out);

/* A parameter a layer wants: suffix ("weight"), kind, shape, init spec. */
typedef struct mge_param_spec {
    const char *suffix;
    mge_valkind kind;
    mge_dtype dtype;
    int ndim;
    int64_t dims[MGE_MAX_DIMS];
    char init[64];
} mge_param_spec;
typedef mge_status (*mge_params_fn)(int op, int nattr, const mge_attr *attrs, const mge_tdesc *x,
                                    mge_param_spec *specs, int *nspecs, mge_error *err);

#define MGE_FAMILY_DECL(fam) \
    mge_status mge_##fam##_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err); \
    double mge_##fam##_flops(const mge_node *n, const mge_tdesc *in, const mge_tdesc *out);
MGE_FAMILY_DECL(conv)
MGE_FAMILY_DECL(linear)
MGE_FAMILY_DECL(norm)
MGE_FAMILY_DECL(unary)
MGE_FAMILY_DECL(binary)
MGE_FAMILY_DECL(pool)
MGE_FAMILY_DECL(reduce)
MGE_FAMILY_DECL(shape)
MGE_FAMILY_DECL(loss)
MGE_FAMILY_DECL(optim)
MGE_FAMILY_DECL(fused)
MGE_FAMILY_DECL(winograd)
MGE_FAMILY_DECL(blocked)
MGE_FAMILY_DECL(quant)
MGE_FAMILY_DECL(index)
MGE_FAMILY_DECL(logic)
MGE_FAMILY_DECL(convt)
MGE_FAMILY_DECL(apool)
MGE_FAMILY_DECL(rnn)
MGE_FAMILY_DECL(resize)
MGE_FAMILY_DECL(pad)
MGE_FAMILY_DECL(gnorm)
MGE_FAMILY_DECL(sort)
MGE_FAMILY_DECL(attn)
MGE_FAMILY_DECL(comm)
MGE_FAMILY_DECL(emath)
MGE_FAMILY_DECL(sample)
MGE_FAMILY_DECL(qlin)
MGE_FAMILY_DECL(pool3d)
/* kernels/kshared.h (header only, shared with the kernels): mge_axis,
 * mge_conv_out_dim, mge_op_flags (ops.def's traits), mge_op_alpha_only,
 * mge_fused_act_ok / unary_ok / binary_ok,
 * mge_winograd_matrices and mge_winograd_weight_transform. */
/* The checks the fused layer ops (fused_conv2d, fused_linear,
 * conv2d_winograd, conv2d_nchwc) share: the input count against the bias
 * and residual attributes (given back in *bias, *res) and act; then the
 * residual (input 2 + bias) against the inferred output. name prefixes the
 * message. */
mge_status mge_fused_check_io(const mge_node *n, const char *name, int *bias, int *res, mge_error *err);
mge_status mge_fused_check_residual(const char *name, const mge_tdesc *r, const mge_tdesc *out, mge_error *err);
mge_status mge_conv_params(int op, int nattr, const mge_attr *attrs, const mge_tdesc *x,
                           mge_param_spec *specs, int *nspecs, mge_error *err);
mge_status mge_linear_params(int op, int nattr, const mge_attr *attrs, const mge_tdesc *x,
                             mge_param_spec *specs, int *nspecs, mge_error *err);
mge_status mge_gnorm_params(int op, int nattr, const mge_attr *attrs, const mge_tdesc *x,
                            mge_param_spec *specs, int *nspecs, mge_error *err);
mge_status mge_norm_params(int op, int nattr, const mge_attr *attrs, const mge_tdesc *x,
                           mge_param_spec *specs, int *nspecs, mge_error *err);
mge_status mge_convt_params(int op, int nattr, const mge_attr *attrs, const mge_tdesc *x,
                            mge_param_spec *specs, int *nspecs, mge_error *err);   /* conv_transpose2d, conv1d, conv3d */
/* lstm, gru (lib/op_rnn.c): up to 4 * KRNN_MAX_LD (kernels/krnn.h) specs */
mge_status mge_rnn_params(int op, int nattr, const mge_attr *attrs, const mge_tdesc *x,
                          mge_param_spec *specs, int *nspecs, mge_error *err);
/* PyTorch's name of param k (weight_ih, weight_hh, bias_ih, bias_hh) of
 * layer l, direction d: "weight_hh_l1_reverse". */
const char *mge_rnn_param_name(int64_t l, int64_t d, int k);
mge_status mge_attn_params(int op, int nattr, const mge_attr *attrs, const mge_tdesc *x,
                           mge_param_spec *specs, int *nspecs, mge_error *err);
mge_status mge_unary_params(int op, int nattr, const mge_attr *attrs, const mge_tdesc *x,
                            mge_param_spec *specs, int *nspecs, mge_error *err);

/* ---------------------------------------------------------------- gradient rules
 * lib/grad_<family>.c: the rule of every op of the family (lib/autodiff.c
 * calls it while walking the graph backwards from the loss).
 *   node:  the forward node (copy what you need from g->nodes[node] first:
 *          emitting nodes may move g->nodes and g->values);
 *   dy:    per output, the value holding d(loss)/d(output), or -1 (zero);
 *   want:  per input, whether its gradient is needed;
 *   dx:    per input, set to the value holding d(loss)/d(input), with the
 *          input's dtype and template shape, or -1 (no gradient: integer
 *          inputs, argmax, not wanted). Preset to -1 by the caller.
 * Ops without a gradient return MGE_ERR_UNSUPPORTED naming the op. */
typedef mge_status (*mge_grad_fn)(mge_graph *g, int node, const int *dy, const char *want, int *dx, mge_error *err);
#define MGE_GRAD_DECL(fam) \
    mge_status mge_##fam##_grad(mge_graph *g, int node, const int *dy, const char *want, int *dx, mge_error *err);
MGE_GRAD_DECL(conv)
MGE_GRAD_DECL(linear)
MGE_GRAD_DECL(norm)
MGE_GRAD_DECL(unary)
MGE_GRAD_DECL(binary)
MGE_GRAD_DECL(pool)
MGE_GRAD_DECL(reduce)
MGE_GRAD_DECL(shape)
MGE_GRAD_DECL(loss)
MGE_GRAD_DECL(optim)
MGE_GRAD_DECL(fused)
MGE_GRAD_DECL(winograd)
MGE_GRAD_DECL(blocked)
MGE_GRAD_DECL(quant)
MGE_GRAD_DECL(index)
MGE_GRAD_DECL(logic)
MGE_GRAD_DECL(convt)
MGE_GRAD_DECL(apool)
MGE_GRAD_DECL(rnn)
MGE_GRAD_DECL(resize)
MGE_GRAD_DECL(pad)
MGE_GRAD_DECL(gnorm)
MGE_GRAD_DECL(sort)
MGE_GRAD_DECL(attn)
MGE_GRAD_DECL(comm)
MGE_GRAD_DECL(emath)
MGE_GRAD_DECL(sample)
MGE_GRAD_DECL(qlin)
MGE_GRAD_DECL(pool3d)
mge_grad_fn mge_op_grad_fn(int op);
/* mge_grad_build with the gradient of `out` (any shape) given as the value
 * dout (its dtype and shape) instead of 1 for a scalar loss; dout < 0 means 1.
 * The finite-difference tests use it to check one rule at a time. */
mge_status mge_grad_build_from(mge_graph *g, int out, int dout, int nwrt, const int *wrt, int *grads,
                               mge_error *err);

/* Emitting helpers for rules (lib/autodiff.c). mge_grad_emit adds one node
 * named after base ("conv1") with a unique suffix, its nout outputs named
 * likewise, and returns the first output's value index (outs[] gets all when
 * not NULL), or -1 with err set. */
int mge_grad_emit(mge_graph *g, const char *base, int op, int nin, const int *in, int nattr, const mge_attr *attrs,
                  int nout, int *outs, mge_error *err);
/* A scalar (ndim 0) f32 const holding v; -1 on failure. */
int mge_grad_const(mge_graph *g, float v, mge_error *err);
/* The forward node's attributes, for passing through to a gradient op
 * (only keys the target op's schema has are kept). */
int mge_grad_attrs(const mge_node *n, int target_op, mge_attr *out);

mge_infer_fn mge_op_infer_fn(int op);
mge_flops_fn mge_op_flops_fn(int op);

/* lib/graph_shapes.c: the template of node n (not yet in g) into out[] and
 * its outputs' probe descs into *pend, which mge_graph_probes_commit stores
 * (and frees) once n is in g with its outputs. */
mge_status mge_graph_infer_node(mge_graph *g, const mge_node *n, mge_tdesc *out, mge_tdesc **pend, mge_error *err);
mge_status mge_graph_probes_commit(mge_graph *g, const mge_node *n, mge_tdesc *pend);
void mge_graph_probes_free(mge_graph *g);
/* Value v's concrete desc at probe p (0..4) of the graph's probe bindings. */
mge_status mge_graph_probe_desc(mge_graph *g, int v, int p, mge_tdesc *d, mge_error *err);
/* 1 when values a and b have the same concrete shape at every probe: two
 * templates that differ as expressions but agree wherever the graph is
 * valid (2*(H/4) and H/2 in a net that needs H divisible by 4). */
int mge_graph_probes_agree(mge_graph *g, int a, int b);
/* A binding of all the graph's symbols for planning without a run (N = 1). */
void mge_graph_probe_binding(const mge_graph *g, mge_binding *b);
/* A dim as passes that choose by size see it: a number as is; a symbolic
 * one evaluated at the graph's opt.shape metadata (mge-opt --shape), else
 * at N = 1 and 224, 256, ... for the other symbols; -1 when unknown (DYN). */
int64_t mge_pass_dim(const mge_graph *g, int64_t code);
/* Dim k of value v the same way; a plan-time dim (MGE_DIM_DYN) from the
 * graph inferred once at that binding. */
int64_t mge_pass_value_dim(const mge_graph *g, int v, int k);
/* Value v's desc at that binding (for messages: O(graph)). */
mge_status mge_graph_friendly_desc(mge_graph *g, int v, mge_tdesc *d, mge_error *err);
/* lib/symdim.c: the expression over cand[] (values cv[j * np + p]) that
 * gives y[p] at every probe p, or MGE_DIM_DYN. */
int64_t mge_dim_fit(int np, const int64_t *y, int ncand, const int64_t *cand, const int64_t *cv);
mge_params_fn mge_op_params_fn(int op);   /* NULL for non-layer ops */

/* Attribute lookup in a raw list (before a node exists). */
const mge_attr *mge_attrs_find(int nattr, const mge_attr *attrs, int key);
/* Fills in schema defaults and checks types/required keys; out holds nschema entries. */
mge_status mge_attrs_complete(int op, int nattr, const mge_attr *attrs, mge_attr *out, int *nout, mge_error *err);

/* Shape helpers the op families share (the kernels' are in kshared.h). */
int64_t mge_tdesc_numel(const mge_tdesc *d);
/* Element count as a double: FLOP counts never overflow, whatever the dims. */
double mge_tdesc_count(const mge_tdesc *d);
/* "f32[1,3,224,224]" into b; returns b. */
const char *mge_tdesc_str(const mge_tdesc *d, char *b, size_t n);
/* Fills one parameter spec (init is copied, e.g. "ones" or "uniform(0.1)"). */
void mge_param_spec_set(mge_param_spec *p, const char *suffix, mge_valkind kind, mge_dtype dt, int ndim,
                        const int64_t *dims, const char *init);
/* numpy broadcasting of a and b into out; 0 when incompatible. */
int mge_broadcast(const mge_tdesc *a, const mge_tdesc *b, mge_tdesc *out);

/* ---------------------------------------------------------------- thread pool */

typedef struct mge_pool mge_pool;
mge_pool *mge_pool_create(int nthreads);   /* nthreads includes the caller */
void mge_pool_free(mge_pool *p);
int mge_pool_size(const mge_pool *p);
/* Runs fn(arg, task, thread) for task in [0, ntasks) and waits. thread is in
 * [0, size). A NULL pool runs serially on the caller. */
typedef void (*mge_task_fn)(void *arg, int64_t task, int thread);
void mge_pool_run(mge_pool *p, int64_t ntasks, mge_task_fn fn, void *arg);
/* Profilers: fn(ud, thread, 0/1) when a thread starts/stops taking tasks of
 * one mge_pool_run (NULL: off, one pointer test). */
void mge_pool_set_hook(mge_pool *p, mge_exec_task_hook fn, void *ud);

/* ---------------------------------------------------------------- kernels */

/* What the allreduce ops' kernels call (lib/dist.c): put hands gradient
 * bytes to bucket b at element offset off (the bucket starts its sum when
 * its last gradient arrives); wait gives back the summed ones. */
typedef struct mge_kcomm {
    void *ud;
    mge_status (*put)(void *ud, int64_t b, int64_t off, const float *x, int64_t n, mge_error *err);
    mge_status (*wait)(void *ud, int64_t b, int64_t off, float *y, int64_t n, mge_error *err);
    /* blocking sum of n doubles over the ranks, in place (sync_batchnorm) */
    mge_status (*sum)(void *ud, double *v, int64_t n, mge_error *err);
    double (*share)(void *ud);   /* this rank's samples over the global batch's */
} mge_kcomm;

typedef struct mge_kctx {
    mge_pool *pool;          /* may be NULL (serial) */
    int threads;             /* size of pool, >= 1 */
    void *ws;                /* scratch of the size the kernel's ws() asked for */
    size_t ws_size;
    int training;
    mge_rng *rng;            /* dropout in training */
    uint64_t seed;           /* one per run in training: draws a backward node replays (attention
                                dropout) hash it with a key naming the forward node */
    void *prepared;          /* what the device's prepare() made for this node, or NULL */
    const char *opname;      /* the node's op ("conv2d"), static, for messages; NULL: unknown */
    const mge_kcomm *comm;   /* distributed training's buckets, or NULL */
} mge_kctx;

/* The name a kernel's messages give: kernels see the kernel context and
 * the node, never the op registry, so the executor passes the op's name;
 * without one (a hand-made context) the node's own name stands in. */
static inline const char *mge_kctx_opname(const mge_kctx *ctx, const mge_node *n)
{
    if (ctx && ctx->opname)
        return ctx->opname;
    return n && n->name ? n->name : "?";
}

/* in[i]/out[i] have concrete shapes and data; out[0] may alias in[0] when the
 * op is MGE_OPF_INPLACE and the planner chose so. */
typedef mge_status (*mge_kernel_fn)(const mge_kctx *ctx, const mge_node *n,
                                    mge_tensor *const *in, mge_tensor *const *out, mge_error *err);
typedef size_t (*mge_ws_fn)(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, int threads);

/* A kernel's state made once from a node's persistent inputs (weights
 * packed for it): in[k] is NULL for an input whose value may change from run
 * to run. *state = NULL says there is nothing to keep. */
typedef mge_status (*mge_kprep_fn)(const mge_node *n, mge_tensor *const *in, void **state, mge_error *err);

typedef struct mge_kernel {
    mge_kernel_fn run;
    mge_ws_fn ws;            /* NULL: no scratch */
    /* optional: the executor calls prepare once, on the first run of an
     * inference executor whose params are fixed (mge_exec_opts.preprocess,
     * not training), and passes the state as mge_kctx.prepared to every
     * launch; elsewhere prepared is NULL and the kernel does without */
    mge_kprep_fn prepare;
    void (*release)(void *state);
} mge_kernel;

/* A backend: a kernel table indexed by op x dtype (of the first input).
 * An empty slot falls back to the ref backend. */
typedef struct mge_backend {
    const char *name;
    mge_kernel k[MGE_NOPS][MGE_NDTYPES];
} mge_backend;

const mge_backend *mge_backend_ref(void);
const mge_backend *mge_backend_cpu(void);
const mge_backend *mge_backend_get(const char *name);   /* "cpu", "ref"; NULL if unknown */
/* The kernel for node n with first-input dtype dt on backend b, falling back to ref. */
const mge_kernel *mge_backend_kernel(const mge_backend *b, int op, mge_dtype dt);

/* Registration (one function per kernel file, called once by the backend). */
void mge_ref_register_conv(mge_backend *b);
void mge_ref_register_linear(mge_backend *b);
void mge_ref_register_norm(mge_backend *b);
void mge_ref_register_unary(mge_backend *b);
void mge_ref_register_binary(mge_backend *b);
void mge_ref_register_pool(mge_backend *b);
void mge_ref_register_reduce(mge_backend *b);
void mge_ref_register_shape(mge_backend *b);
void mge_ref_register_loss(mge_backend *b);
void mge_cpu_register_gemm(mge_backend *b);     /* conv, linear, matmul on OpenBLAS */
void mge_cpu_register_elemwise(mge_backend *b); /* unary, binary */
void mge_cpu_register_pool(mge_backend *b);
void mge_cpu_register_misc(mge_backend *b);     /* norm, reduce, shape */
void mge_cpu_register_shape(mge_backend *b);    /* slice, expand, tile, split, concat (cpu_shape.c) */
/* gradient and optimizer kernels */
void mge_ref_register_grad_conv(mge_backend *b);   /* conv2d, linear grads */
void mge_ref_register_grad_pool(mge_backend *b);
void mge_ref_register_grad_elem(mge_backend *b);   /* unary, binary, loss grads */
void mge_ref_register_grad_reduce(mge_backend *b); /* reduce, shape grads */
void mge_ref_register_grad_norm(mge_backend *b);
void mge_ref_register_optim(mge_backend *b);
void mge_cpu_register_grad_conv(mge_backend *b);   /* conv2d, linear grads on OpenBLAS */
void mge_cpu_register_grad_pool(mge_backend *b);
void mge_cpu_register_grad_elem(mge_backend *b);   /* elementwise, loss grads */
void mge_cpu_register_grad_norm(mge_backend *b);   /* batchnorm training forward and grad */
void mge_cpu_register_optim(mge_backend *b);
/* fused, winograd and blocked-layout kernels (mge-opt's passes write these ops) */
void mge_ref_register_fused(mge_backend *b);        /* fused_conv2d, fused_linear */
void mge_ref_register_fused_elem(mge_backend *b);   /* fused_elemwise */
void mge_ref_register_winograd(mge_backend *b);
void mge_ref_register_blocked(mge_backend *b);
void mge_ref_register_quant(mge_backend *b);          /* int8 ops, avgpool on qs8 (ref_quant.c) */
void mge_cpu_register_fused_elem(mge_backend *b);   /* fused_elemwise (fused_conv2d/linear: cpu_gemm.c) */
void mge_cpu_register_winograd(mge_backend *b);
void mge_cpu_register_winograd_nchwc(mge_backend *b);   /* called by mge_cpu_register_winograd */
void mge_cpu_register_blocked(mge_backend *b);
void mge_cpu_register_qgemm(mge_backend *b);   /* qconv2d, qlinear (cpu_qgemm.c) */
void mge_cpu_register_quant(mge_backend *b);   /* quantize, dequantize, qadd, qs8 pools (cpu_quant.c) */
/* indexing (gather, scatter, one_hot) and logic (where, comparisons, bool ops) */
void mge_ref_register_index(mge_backend *b);
void mge_ref_register_logic(mge_backend *b);
void mge_cpu_register_index(mge_backend *b);
void mge_cpu_register_logic(mge_backend *b);
/* conv_transpose2d, conv1d, conv3d and adaptive pooling with their gradients (after conv and grad_conv) */
void mge_ref_register_convt(mge_backend *b);
void mge_ref_register_apool(mge_backend *b);
void mge_cpu_register_convt(mge_backend *b);
void mge_cpu_register_apool(mge_backend *b);
/* recurrent layers: lstm, gru and their gradient ops */
void mge_ref_register_rnn(mge_backend *b);
void mge_ref_register_pool3d(mge_backend *b);
void mge_cpu_register_rnn(mge_backend *b);
void mge_cpu_register_pool3d(mge_backend *b);
/* spatial: resize, pad, group/instance/rms norm and their gradients */
void mge_ref_register_resize(mge_backend *b);
void mge_ref_register_pad(mge_backend *b);
void mge_ref_register_gnorm(mge_backend *b);
void mge_cpu_register_resize(mge_backend *b);
void mge_cpu_register_pad(mge_backend *b);
void mge_cpu_register_gnorm(mge_backend *b);
/* spatial sampling: grid_sample and its gradient (ref_sample.c; cpu runs ref's) */
void mge_ref_register_sample(mge_backend *b);
void mge_ref_register_roi(mge_backend *b);      /* roi_align (ref_roi.c) */
void mge_ref_register_deform(mge_backend *b);   /* deform_conv2d (ref_deform.c) */
/* topk, sort, argsort, cumsum (ref_sort.c, cpu_sort.c) */
void mge_ref_register_sort(mge_backend *b);
void mge_cpu_register_sort(mge_backend *b);
void mge_cpu_register_permute(mge_backend *b);   /* transpose (cpu_permute.c) */
void mge_cpu_register_grad_layernorm(mge_backend *b);   /* layernorm_grad (cpu_grad_layernorm.c) */
void mge_ref_register_attn(mge_backend *b);   /* embedding, scaled_dot_product_attention (+ grad) */
void mge_cpu_register_attn(mge_backend *b);
void mge_cpu_register_loss(mge_backend *b);   /* cross_entropy (+ grad); after grad_elem's */
/* distributed: allreduce, allreduce_wait (ref_comm.c) */
void mge_ref_register_comm(mge_backend *b);
/* ONNX linear quantization: quantize_linear, dequantize_linear, requantize, matmul_integer,
 * conv_integer (ref_qlin.c) */
void mge_ref_register_qlin(mge_backend *b);
void mge_cpu_register_qlin(mge_backend *b);   /* matmul_integer, conv_integer (cpu_qlin.c) */
void mge_cpu_register_comm(mge_backend *b);   /* sync_batchnorm on the pool (cpu_comm.c) */
/* extra math (area math): the cpu backend runs these ref kernels */
void mge_ref_register_bitwise(mge_backend *b);   /* bitwise ops, shifts (ref_bitwise.c) */
void mge_ref_register_emath(mge_backend *b);     /* det, eye_like, lrn, dft and their gradients (ref_emath.c) */

/* kernels/cpu/cpu_isa.c: the vector ISA kernels and passes may use (cpuid, capped by
 * MGE_CPU_ISA=baseline|avx2|avx2-vnni|avx512|avx512-vnni|avx512-bf16|amx), the int8
 * kernels' own level: AVX2 (vpmaddubsw), AVX-VNNI (256-bit vpdpbusd), AVX-512
 * VNNI, AMX (tdpbusd); and the bf16 kernels' level: none (f32 kernels),
 * AVX512-BF16 (vdpbf16ps), AMX (tdpbf16ps). The AMX levels imply the
 * process holds the tile permission. */
enum { MGE_ISA_BASE = 0, MGE_ISA_AVX2 = 1, MGE_ISA_AVX512 = 2 };
int mge_cpu_isa(void);
enum { MGE_INT8_BASE = 0, MGE_INT8_AVX2 = 1, MGE_INT8_AVXVNNI = 2, MGE_INT8_AVX512VNNI = 3, MGE_INT8_AMX = 4 };
int mge_cpu_int8(void);
const char *mge_cpu_int8_name(int level);   /* "portable", "avx2", "avx-vnni", "avx512-vnni", "amx-int8" */
enum { MGE_BF16_NONE = 0, MGE_BF16_AVX512 = 1, MGE_BF16_AMX = 2 };
int mge_cpu_bf16(void);
const char *mge_cpu_bf16_name(int level);   /* "none (f32)", "avx512-bf16", "amx-bf16" */
/* Why the bf16 level is below AMX ("" when it is AMX), for -v. */
const char *mge_cpu_bf16_note(void);

/* OpenBLAS thread count. The executor sets it to 1: our pool is the only
 * one, and kernels call OpenBLAS from pool tasks, each on its own block
 * (several threads inside OpenBLAS at once; see kernels/cpu/cpu_blas.c). */
void mge_blas_set_threads(int n);

/* ---------------------------------------------------------------- planner */

/* One planned buffer per value of a scheduled (sub)graph. */
typedef struct mge_plan {
    mge_binding bind;
    int nvalues;
    int *ndims;              /* per value */
    int64_t *dims;           /* per value, MGE_MAX_DIMS each */
    size_t *nbytes;          /* per value */
    int64_t *offset;         /* per value: arena offset, or -1 when not in the arena */
    int *alias;              /* per value: value whose buffer it shares (in-place/view), or -1 */
    size_t *ws;              /* per node: scratch bytes */
    size_t dev_arena[2];     /* per device (0 host, 1 the executor's device): arena bytes */
    size_t dev_lower[2];     /* its lower bound */
    size_t dev_ws[2];        /* the largest scratch of a node there */
    mge_plan_stats st;       /* arena and lower bound summed over the devices */
} mge_plan;

/* Plans the nodes with need[i] != 0 at the given batch. be (may be NULL)
 * gives per-node scratch sizes. Graph outputs are planned in the arena like
 * any other value; inputs, params, state and consts are not. vdev (per
 * value, NULL: all on the host) says which device's arena holds a value:
 * one arena per device, planned alike. */
mge_status mge_plan_build(const mge_graph *g, const char *need, const mge_binding *b, int nout, const int *outs,
                          const mge_backend *be, int threads, const signed char *vdev, mge_plan *p,
                          mge_error *err);
void mge_plan_free(mge_plan *p);
/* The placement mge_plan_build uses, on its own: offsets off[nb] in one
 * arena for buffers of size[i] bytes (multiples of 64) live during steps
 * [start[i], end[i]] (inclusive; buffers live at a common step never
 * overlap), and the arena size. */
mge_status mge_plan_place(int nb, const size_t *size, const int *start, const int *end, int64_t *off,
                          size_t *arena, mge_error *err);
/* Planned arena bytes live while each needed node runs (live[nnodes]; 0 for
 * nodes that do not run); the largest entry is the plan's lower bound. */
mge_status mge_plan_live(const mge_graph *g, const char *need, int nout, const int *outs, const mge_plan *p,
                         size_t *live, mge_error *err);

/* ---------------------------------------------------------------- misc */

/* The first node named name, or -1, through a hash of the node names that
 * lib/graph.c keeps up to date with appended nodes. */
int mge_graph_find_node(mge_graph *g, const char *name);
char *mge_strdup(const char *s);
/* mge_exec_create whose device and device-resident values are with's
 * (with outlives the new executor): the trainer's eval executor reads the
 * params its training executor updates on the device. */
mge_status mge_exec_create_shared(const mge_graph *g, const mge_exec_opts *o, mge_exec *with, mge_exec **out,
                                  mge_error *err);
/* The communicator the allreduce kernels of e reach (NULL: none). */
void mge_exec_set_comm(mge_exec *e, const mge_kcomm *c);
/* lib/dist.c: the trainer's data-parallel part. mge_dist_insert puts an
 * allreduce (after the gradient's producer) and an allreduce_wait (before
 * the update) on each of the ngrads gradients, in buckets of bucket_bytes
 * in the order the backward pass makes them, and replaces grads[i] by the
 * summed ones; *dist gets the runtime the kernels call. */
typedef struct mge_dist mge_dist;
mge_status mge_dist_insert(mge_graph *g, mge_comm *comm, double bucket_bytes, int ngrads, int *grads,
                           mge_dist **dist, mge_error *err);
const mge_kcomm *mge_dist_kcomm(mge_dist *d);
void mge_dist_set_share(mge_dist *d, double share);
/* After a step: a failed one leaves buckets started; this waits them out. */
mge_status mge_dist_end_step(mge_dist *d, mge_error *err);
int mge_dist_stats(const mge_dist *d, mge_comm_stats *st);
void mge_dist_free(mge_dist *d);
/* Moves nodes of g into order[] (a permutation of 0..nnodes-1); the node
 * name index is rebuilt. Topological order is the caller's duty. */
mge_status mge_graph_reorder_nodes(mge_graph *g, const int *order, mge_error *err);
/* FNV-1a of a C string: name lookup and per-name RNG streams. */
uint64_t mge_hash_str(const char *s);
char *mge_strndup(const char *s, size_t n);

/* ---------------------------------------------------------------- pass helpers
 * lib/pass_util.c: graph rewriting the passes share. */

/* Per value, how many reads it has: node inputs (of every node, counted once
 * per input slot), graph outputs and the loss. uses[nvalues]. */
void mge_pass_count_uses(const mge_graph *g, int *uses);
/* Rewiring in bulk, for passes that rewire many values (one pass over the
 * nodes instead of one per value): mge_pass_redirect records that reads
 * of `from` are to read `target` (to[from] = target; to[] is -1 where
 * nothing is redirected; target must not be redirected itself) and
 * rewires the graph outputs and the loss at once; mge_pass_rewire then
 * makes the node inputs follow to[]. In between, a pass reads a node
 * input v as to[v] >= 0 ? to[v] : v. */
void mge_pass_redirect(mge_graph *g, int *to, int from, int target);
void mge_pass_rewire(mge_graph *g, const int *to);
/* 1 when v is one of the graph outputs or the loss. */
int mge_pass_is_root(const mge_graph *g, int v);
/* A fresh f32 tensor of value v's template shape (which must be concrete). */
mge_status mge_pass_new_f32(const mge_value *v, mge_tensor **out, mge_error *err);
/* Where conv weight w[o][i][kh][kw] (plain [O,Ci,KH,KW]) sits in the
 * blocked layout of conv2d_nchwc: [Ob,Cb,KH,KW,ci,c] for a dense conv (G
 * = 1), [Ob,KH,KW,c] for a depthwise one. The layout pass packs by it and
 * unfuse unpacks by it. */
static inline int64_t mge_nchwc_weight_at(int64_t G, int64_t o, int64_t i, int64_t kh, int64_t kw, int64_t Cb,
                                          int64_t ci, int64_t c, int64_t KH, int64_t KW)
{
    int64_t ob = o / c, lo = o % c;
    if (G == 1)
        return ((((ob * Cb + i / ci) * KH + kh) * KW + kw) * ci + i % ci) * c + lo;
    return ((ob * KH + kh) * KW + kw) * c + lo;
}
/* Replaces value v's data by t (taking it); the old tensor is freed, its
 * bytes are never written (they may live in a read-only mapping). */
void mge_pass_set_data(mge_graph *g, int v, mge_tensor *t);

typedef struct mge_prune_opts {
    const char *drop_input;   /* per graph input (declaration order): may go when nothing needs it; NULL: keep all */
    char *const *rename;      /* per value: new name for a kept value, or NULL; NULL: none */
    int (*keep_meta)(const char *key); /* NULL: keep all metadata */
} mge_prune_opts;

/* Rebuilds *gp like dce (keeping what the outputs and the loss need, the
 * params, state and consts those nodes read, and the graph inputs) and also
 * drops the inputs o->drop_input allows, renames values and filters the
 * metadata. Data, init specs and the mapping move to the new graph. When
 * nothing would change, *changed = 0 and *gp is left alone; on failure
 * *gp is unchanged too. */
mge_status mge_pass_prune(mge_graph **gp, const mge_prune_opts *o, int *changed, mge_error *err);

/* The output channels of node `node` when it is a conv2d or linear whose
 * weight (and bias, if any) are f32 with data, read by this node alone
 * (uses from mge_pass_count_uses), so they can be replaced; else 0. */
int mge_pass_layer_channels(const mge_graph *g, int node, const int *uses);
/* Folds y' = y * scale[o] + shift[o] per output channel o into a conv2d or
 * linear node that mge_pass_layer_channels accepts: new weight W * scale,
 * new bias b * scale + shift, in double and stored as new f32 tensors.
 * scale or shift may be NULL (1 and 0). A node without bias gets one (a new
 * param NODE.bias, bias=true) when some shift is not 0. On failure g is
 * valid and computes what it did. */
mge_status mge_pass_fold_affine(mge_graph *g, int node, const double *scale, const double *shift, mge_error *err);


/* Rebuilding a graph into a fresh one c (mge_graph_new): the values with
 * keep[v], in the old order, renamed where rename[v] (rename may be NULL)
 * says (remap[v]: new index or -1; kept inputs keep their declaration
 * order); nodes appended with outputs that are existing values of c; then
 * outputs, loss, meta (those keep_meta accepts; NULL: all), tensor data,
 * init specs and the mapping move over and g is freed (nothing can fail
 * after the moves start). */
mge_status mge_pass_rb_values(const mge_graph *g, const char *keep, char *const *rename, mge_graph *c, int *remap,
                              mge_error *err);
mge_status mge_pass_rb_node(mge_graph *c, const char *name, int op, int nin, const int *in, int nout,
                            const int *out, int nattr, const mge_attr *attrs, mge_error *err);
/* keep (all 1) and remap sized for g's values, and c empty; all or none. */
mge_status mge_pass_rb_alloc(const mge_graph *g, char **keep, int **remap, mge_graph **c, mge_error *err);
/* mge_pass_rb_finish(*gp, *c, ...), then *gp = *c, *c = NULL, *changed = 1. */
mge_status mge_pass_rb_end(mge_graph **gp, mge_graph **c, const int *remap, int (*keep_meta)(const char *key),
                           int *changed, mge_error *err);
/* A new value of c named <base><suffix>, made unique in g and c with .1, .2, ... */
mge_status mge_pass_rb_new_value(const mge_graph *g, mge_graph *c, const char *base, const char *suffix,
                                 mge_valkind kind, mge_dtype dt, int ndim, const int64_t *dims, int *idx,
                                 mge_error *err);
/* Appends node n of the old graph unchanged, in and out through remap. */
mge_status mge_pass_rb_copy(mge_graph *c, const mge_node *n, const int *remap, mge_error *err);
mge_status mge_pass_rb_finish(mge_graph *g, mge_graph *c, const int *remap, int (*keep_meta)(const char *key),
                              mge_error *err);

/* fold-bn and fold-scale: folds scale/shift (mge_pass_fold_affine) into
 * layer, whose output y the folded node `out` read, and redirects out's
 * readers to y (mge_pass_redirect on *to: the caller runs mge_pass_rewire
 * at the end); out takes y's place under its name when it is a graph
 * output or the loss (via *rename for the final mge_pass_prune). *uses,
 * *rename and *to (per value) grow when the layer gains a bias. */
mge_status mge_pass_fold_into(mge_graph *g, int layer, const double *scale, const double *shift, int out, int y,
                              int **uses, char ***rename, int **to, mge_error *err);

/* lib/quant_check.c: the int8 ops' stated input scales and zero points
 * agree with their inputs' writers (mge_graph_validate calls it). On a
 * mismatch *bad_node (may be NULL) gets the reader's node index. */
mge_status mge_quant_check(const mge_graph *g, int *bad_node, mge_error *err);

/* pass_layout.c: elementwise ops that map zero to zero, which the layout
 * pass lets run on blocked tensors (and unfuse takes back). */
int mge_layout_zero_op(int64_t op);

#endif
