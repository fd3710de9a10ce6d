/* mge.h — the one public header of libmge.
 *
 * The library never prints and never exits: every fallible call returns an
 * mge_status and, when an mge_error is passed, a message the tool prints.
 * Structures are transparent on purpose (C-style, like zlib's z_stream):
 * tools and passes walk the graph directly instead of through accessors. */
#ifndef MGE_H
#define MGE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MGE_VERSION_STRING "0.1.0"
#define MGE_MAX_DIMS 8
/* Template dims (graph values): d >= 0 is a number; d < 0 names a symbol
 * or an expression over symbols in a process-wide table (mge_dim_*), so
 * dims copy between graphs as plain integers. MGE_DIM_N is the symbol N
 * (the batch); MGE_DIM_DYN is a dim known only at plan time, computed by
 * the ops from the binding. Inputs may use numbers and bare symbols. */
#define MGE_DIM_N (-1)
#define MGE_DIM_DYN (-2)
#define MGE_MAX_SYMS 16

/* A shape binding: a value for each symbol (sym[i] a symbol's dim code). */
typedef struct mge_binding {
    int n;
    int64_t sym[MGE_MAX_SYMS];
    int64_t val[MGE_MAX_SYMS];
} mge_binding;
/* The one-call path for batch-only graphs: a pointer to the binding {N = b}
 * (a C99 compound literal, valid in the enclosing block). */
#define MGE_BATCH(b) (&(mge_binding){1, {MGE_DIM_N}, {(b)}})

/* ---------------------------------------------------------------- status */

typedef enum mge_status {
    MGE_OK = 0,
    MGE_ERR_INVALID,     /* bad argument, malformed graph, unknown name */
    MGE_ERR_FORMAT,      /* malformed file or stream */
    MGE_ERR_IO,          /* read/write failure (errno text in the message) */
    MGE_ERR_NOMEM,
    MGE_ERR_SHAPE,       /* shapes or dtypes that do not fit */
    MGE_ERR_UNSUPPORTED, /* valid but not implemented (dtype, version, ...) */
    MGE_ERR_EOF,         /* clean end of a stream: zero bytes before a record */
    MGE_ERR_MISMATCH,    /* a comparison (--check, --verify) failed */
    MGE_ERR_NONFINITE    /* NaN or inf where finite numbers belong (a diverging training step) */
} mge_status;

typedef struct mge_error {
    mge_status code;
    int line, col;       /* > 0 for text-form errors: the tool prints FILE:LINE:COL */
    char msg[1024];
} mge_error;

/* Fills err (may be NULL) and returns code. printf-style. */
mge_status mge_error_set(mge_error *err, mge_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
mge_status mge_error_at(mge_error *err, mge_status code, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Prefix an existing message with "what: " (e.g. a tensor name). */
void mge_error_prefix(mge_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void mge_error_clear(mge_error *err);
const char *mge_status_name(mge_status s);

/* ---------------------------------------------------------------- dtypes */

typedef enum mge_dtype {
    MGE_F32 = 0,
    MGE_F16,
    MGE_BF16,
    MGE_I8,
    MGE_U8,
    MGE_I32,
    MGE_I64,
    MGE_BOOL,
    MGE_QS8,   /* int8 with scale (per tensor or per channel) */
    MGE_QS32,  /* int32 with scale (biases of quantized layers) */
    /* appended so stored dtype numbers keep their meaning */
    MGE_F64,
    MGE_I16,
    MGE_U16,
    MGE_U32,
    MGE_U64,
    MGE_NDTYPES
} mge_dtype;

const char *mge_dtype_name(mge_dtype dt);              /* "f32", ... */
int mge_dtype_parse(const char *s, size_t n, mge_dtype *out); /* 1 on success */
size_t mge_dtype_size(mge_dtype dt);
int mge_dtype_is_float(mge_dtype dt); /* f32, f16, bf16, f64 */
/* Element i of an array of dtype dt as a double (u64/i64 beyond 2^53
 * rounded; qs8/qs32: the stored integer), and the store of v: rounded to a
 * float dtype, or saturated and truncated toward zero (NaN: 0) to an
 * integer one; bool is v != 0. */
double mge_dtype_get(mge_dtype dt, const void *p, int64_t i);
void mge_dtype_set(mge_dtype dt, void *p, int64_t i, double v);

/* f16/bf16 conversions (round to nearest even). */
uint16_t mge_f32_to_f16(float f);
float mge_f16_to_f32(uint16_t h);
uint16_t mge_f32_to_bf16(float f);
float mge_bf16_to_f32(uint16_t h);
/* The same from a double, rounded once (not through f32's rounding). */
uint16_t mge_f64_to_f16(double d);
uint16_t mge_f64_to_bf16(double d);

typedef enum mge_layout {
    MGE_LAYOUT_DEFAULT = 0, /* row-major in the op's natural order (NCHW for images) */
    MGE_LAYOUT_NHWC,
    MGE_LAYOUT_NCHW8C,      /* blocked NCHWc, c = 8 (AVX2) */
    MGE_LAYOUT_NCHW16C      /* blocked NCHWc, c = 16 (AVX-512) */
} mge_layout;

/* Quantization parameters of a qs8/qs32 tensor. */
typedef struct mge_quant {
    int axis;          /* -1: per tensor (scale[0]); else per channel along axis */
    int nscale;        /* 0 when not quantized */
    float *scale;      /* owned */
    int32_t zero;      /* zero point (per tensor) */
} mge_quant;

/* ---------------------------------------------------------------- tensors */

enum {
    MGE_TENSOR_OWNED = 1u,  /* data was allocated by mge_tensor_alloc and is freed with the tensor */
};

typedef struct mge_tensor {
    mge_dtype dtype;
    int ndim;
    int64_t dims[MGE_MAX_DIMS];
    mge_layout layout;
    void *data;
    size_t nbytes;
    unsigned flags;
    mge_quant q;
} mge_tensor;

/* Element count with overflow checks: fails (MGE_ERR_SHAPE) on negative dims or
 * a count or byte size beyond 2^48 elements / SIZE_MAX bytes. */
mge_status mge_shape_numel(int ndim, const int64_t *dims, mge_dtype dt,
                           int64_t *numel, size_t *nbytes, mge_error *err);
int64_t mge_tensor_numel(const mge_tensor *t);
/* Sets shape and allocates zeroed, 64-byte aligned data. t is overwritten. */
mge_status mge_tensor_alloc(mge_tensor *t, mge_dtype dt, int ndim, const int64_t *dims, mge_error *err);
/* Shape only, data = NULL, nbytes computed. */
mge_status mge_tensor_init(mge_tensor *t, mge_dtype dt, int ndim, const int64_t *dims, mge_error *err);
mge_status mge_tensor_copy(mge_tensor *dst, const mge_tensor *src, mge_error *err); /* deep, owned */
void mge_tensor_free(mge_tensor *t);   /* frees owned data and quant scales; zeroes t */
int mge_tensor_same_shape(const mge_tensor *a, const mge_tensor *b);
/* "f32[1,3,224,224]"; returns buf. */
char *mge_shape_str(mge_dtype dt, int ndim, const int64_t *dims, char *buf, size_t n);

void *mge_aligned_alloc(size_t n);     /* 64-byte aligned, zeroed; NULL on failure or n == 0 -> 64 bytes */
void mge_aligned_free(void *p);

/* A named list of tensors (.npz contents, parameter sets). */
typedef struct mge_tlist {
    int n, cap;
    char **names;
    mge_tensor *t;
} mge_tlist;

mge_status mge_tlist_add(mge_tlist *l, const char *name, mge_tensor *t, mge_error *err); /* takes ownership of *t (zeroes it) */
int mge_tlist_find(const mge_tlist *l, const char *name);  /* index or -1 */
void mge_tlist_free(mge_tlist *l);

/* A growable byte buffer: writers produce bytes, tools write them atomically. */
typedef struct mge_buf {
    char *p;
    size_t n, cap;
    int failed;        /* set on allocation failure; later appends are no-ops */
} mge_buf;

int mge_buf_put(mge_buf *b, const void *p, size_t n);   /* 0 on failure */
int mge_buf_printf(mge_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void mge_buf_free(mge_buf *b);

/* ---------------------------------------------------------------- op registry */

/* Attribute keys and ops come from lib/ops.def (one X-macro table). */
typedef enum mge_key {
#define MGE_KEY(name, type) MGE_KEY_##name,
#define MGE_OP(id, name, family, min_in, max_in, nout, flags, schema)
#include "ops.def"
#undef MGE_KEY
#undef MGE_OP
    MGE_NKEYS
} mge_key;

typedef enum mge_op {
#define MGE_KEY(name, type)
#define MGE_OP(id, name, family, min_in, max_in, nout, flags, schema) MGE_OP_##id,
#include "ops.def"
#undef MGE_KEY
#undef MGE_OP
    MGE_NOPS
} mge_op;

typedef enum mge_attr_type {
    MGE_ATTR_INT,    /* i[0] */
    MGE_ATTR_INTS,   /* i[0..n); a scalar written as k is stored as n = 1 */
    MGE_ATTR_FLOAT,  /* f */
    MGE_ATTR_BOOL,   /* i[0] = 0/1 */
    MGE_ATTR_DTYPE,  /* i[0] = mge_dtype */
    MGE_ATTR_OPS,    /* i[0..n) op ids (act=relu, ops=[add, relu]); n = 1 with i[0] = -1 is "none" */
    MGE_ATTR_ENUM,   /* i[0] = index of one of the key's words (mge_key_enum_word) */
    MGE_ATTR_FLOATS  /* n doubles, i[k] holding the bits of value k (mge_attr_float_at) */
} mge_attr_type;

enum {
    MGE_OPF_ELEMWISE = 1u << 0,  /* output[i] depends on input[i] only (after broadcasting) */
    MGE_OPF_INPLACE  = 1u << 1,  /* output may reuse the first input's buffer */
    MGE_OPF_LAYER    = 1u << 2,  /* creates its own params (NODE.weight, ...) when not given */
    MGE_OPF_ALIAS    = 1u << 3,  /* output is a view of input 0 (reshape, flatten) */
    MGE_OPF_LOSS     = 1u << 4,  /* scalar loss */
    MGE_OPF_TRAINING = 1u << 5,  /* behaves differently in training (dropout, batchnorm) */
    MGE_OPF_VAROUT   = 1u << 6,  /* 1 to nout outputs: the node's count decides (split) */
    /* traits that passes and kernels read (see ops.def's header) */
    MGE_OPF_ACT      = 1u << 7,  /* an activation: the fused layers' act= may apply it (implies TABLE) */
    MGE_OPF_ZERO     = 1u << 8,  /* f(0, ...) == 0 exactly: may run on a blocked tensor's zero lanes */
    MGE_OPF_LAYOUT   = 1u << 9,  /* elementwise and position-blind: runs unchanged on blocked NCHWc
                                    tensors whose inputs all have the same layout */
    MGE_OPF_DIFF     = 1u << 10, /* has a gradient rule: autodiff goes through it */
    MGE_OPF_TABLE    = 1u << 11  /* float unary op computed from the activation table (kernels/kact.h) */
};

typedef struct mge_attr {
    int key;                 /* mge_key */
    int n;                   /* number of ints for INTS */
    int64_t i[MGE_MAX_DIMS];
    double f;
} mge_attr;

typedef struct mge_schema_entry {
    int key;
    int required;            /* no default: the text must give it */
    int optional;            /* may be absent (op code supplies a derived default) */
    mge_attr def;            /* default when neither */
} mge_schema_entry;

typedef struct mge_opinfo {
    const char *name;
    const char *family;
    int min_in, max_in, nout;
    unsigned flags;
    const char *schema;      /* "out kernel stride=1 pad=0 ..."; see ops.def */
    int nschema;
    mge_schema_entry sch[12];
} mge_opinfo;

const mge_opinfo *mge_op_info(int op);          /* NULL when out of range */
/* Whether a node of op may have nout outputs: the op's count, or 1 to it
 * for MGE_OPF_VAROUT ops. */
int mge_op_nout_ok(int op, int nout);
int mge_op_lookup(const char *name, size_t n);  /* op id or -1 */
const char *mge_key_name(int key);
mge_attr_type mge_key_type(int key);
int mge_key_lookup(const char *name, size_t n); /* key id or -1 */
const char *mge_attr_op_name(int64_t op);      /* an OPS attribute's entry: op name, "none" for -1 */
/* ENUM keys: word idx of the key, or NULL when out of range; the index of
 * the word w[0..n), or -1; all words, space-separated ("" for other keys). */
const char *mge_key_enum_word(int key, int64_t idx);
int mge_key_enum_lookup(int key, const char *w, size_t n);
const char *mge_key_enum_words(int key);
/* FLOATS attributes: value k (bits in i[k]), and setting it. */
double mge_attr_float_at(const mge_attr *a, int k);
void mge_attr_float_set(mge_attr *a, int k, double v);

/* ---------------------------------------------------------------- symbolic dims */

/* The code of the symbol name[0..n) (letters, digits, '_'; not starting
 * with a digit), made on first use. */
mge_status mge_dim_symbol(const char *name, size_t n, int64_t *code, mge_error *err);
int mge_dim_is_symbol(int64_t code);
const char *mge_dim_name(int64_t code);            /* a symbol's name, else NULL */
/* "224", "N", "(H+1)/2", "2*S", "?" (MGE_DIM_DYN) into b; returns b. */
char *mge_dim_str(int64_t code, char *b, size_t n);
/* The symbols code depends on (with repeats), up to max; returns the count. */
int mge_dim_symbols(int64_t code, int64_t *syms, int max);
/* The value of code under b: fails naming a symbol b lacks, on
 * MGE_DIM_DYN, and when the value overflows int64. */
mge_status mge_dim_eval(int64_t code, const mge_binding *b, int64_t *out, mge_error *err);
/* Expression builders (constants fold; MGE_DIM_DYN when the table is full). */
int64_t mge_dim_add(int64_t a, int64_t b);
int64_t mge_dim_mul(int64_t a, int64_t b);
int64_t mge_dim_div(int64_t a, int64_t d);         /* floor(a / d), d >= 1 */

int mge_binding_get(const mge_binding *b, int64_t sym, int64_t *v);   /* 1 when bound */
mge_status mge_binding_set(mge_binding *b, int64_t sym, int64_t v, mge_error *err);
int mge_binding_equal(const mge_binding *a, const mge_binding *b);   /* same symbols, same values */
char *mge_binding_str(const mge_binding *b, char *buf, size_t n);    /* "N=1,H=224" */

/* ---------------------------------------------------------------- graph IR */

typedef enum mge_valkind {
    MGE_VAL_INPUT = 0,
    MGE_VAL_PARAM,    /* trainable */
    MGE_VAL_STATE,    /* non-trainable but persistent (BN running stats, moments) */
    MGE_VAL_CONST,
    MGE_VAL_NODE      /* output of a node */
} mge_valkind;

typedef struct mge_value {
    char *name;
    mge_valkind kind;
    mge_dtype dtype;
    int ndim;
    int64_t dims[MGE_MAX_DIMS];  /* template shape; MGE_DIM_N marks the batch */
    int producer;                /* node index for MGE_VAL_NODE, else -1 */
    int out_index;               /* which output of the producer */
    mge_tensor *data;            /* params/state/consts: bound value, or NULL */
    char *init;                  /* init spec for params/state without data ("zeros", "uniform(0.1)"), or NULL */
} mge_value;

typedef struct mge_node {
    char *name;
    int op;                      /* mge_op */
    int nin, nout;
    int *in, *out;               /* value indices */
    int nattr;
    mge_attr *attrs;             /* schema order; defaults materialized */
} mge_node;

typedef struct mge_meta {
    char *key;
    char *value;                 /* text; numbers are stored as their text */
} mge_meta;

/* A host buffer of bytes tensors may borrow (a mapped model file): the
 * graph that owns one releases it through release, so the core needs no
 * knowledge of where it came from. */
typedef struct mge_hostbuf {
    void *p;
    size_t n;
    void (*release)(struct mge_hostbuf *b);   /* frees p and b */
} mge_hostbuf;

typedef struct mge_graph {
    int nvalues, cap_values;
    mge_value *values;
    int nnodes, cap_nodes;
    mge_node *nodes;             /* topological order (definition before use) */
    int ninputs, noutputs;
    int *inputs;                 /* value indices, declaration order */
    int *outputs;
    int loss;                    /* value minimized by training, or -1 */
    int nmeta;
    mge_meta *meta;
    void *names;                 /* name -> value index hash (private) */
    struct mge_hostbuf *mapping; /* the host buffer (an mmapped .mge) the tensors may point into, owned */
    void *probes;                /* template inference's probe shapes (private, rebuilt on demand) */
} mge_graph;

mge_graph *mge_graph_new(void);
void mge_graph_free(mge_graph *g);

/* Adds a value; the name must be unique. Returns its index or -1 (err set). */
int mge_graph_add_value(mge_graph *g, const char *name, mge_valkind kind, mge_dtype dt,
                        int ndim, const int64_t *dims, mge_error *err);
int mge_graph_find(const mge_graph *g, const char *name);   /* value index or -1 */
/* Adds a node whose outputs are new values named outnames[0..nout).
 * Attributes not given take schema defaults; required ones missing fail.
 * Output dtypes/shapes are inferred. Returns the node index or -1. */
int mge_graph_add_node(mge_graph *g, const char *name, int op, int nin, const int *in,
                       int nattr, const mge_attr *attrs, int nout, const char *const *outnames,
                       mge_error *err);
/* Creates the parameters of a layer op (conv2d, linear, batchnorm, layernorm)
 * named NODE.weight etc. and returns their indices in order; used by the text
 * parser before mge_graph_add_node when parameters are not passed. */
mge_status mge_graph_layer_params(mge_graph *g, const char *node, int op, int x,
                                  int nattr, const mge_attr *attrs,
                                  int *params, int *nparams, mge_error *err);
mge_status mge_graph_add_output(mge_graph *g, int value, mge_error *err);
mge_status mge_graph_set_meta(mge_graph *g, const char *key, const char *value, mge_error *err);
const char *mge_graph_get_meta(const mge_graph *g, const char *key);

/* Attribute access with schema defaults: the value, or def when absent. */
const mge_attr *mge_node_attr(const mge_node *n, int key);
int64_t mge_node_int(const mge_node *n, int key, int64_t def);
/* INTS attribute element idx; a single value broadcasts (kernel=3 -> 3,3). */
int64_t mge_node_ints(const mge_node *n, int key, int idx, int64_t def);
double mge_node_float(const mge_node *n, int key, double def);

/* Re-infers every node output's dtype and template shape (after edits). */
mge_status mge_graph_infer(mge_graph *g, mge_error *err);
/* Concrete shapes under binding b (MGE_BATCH(n) for batch-only graphs):
 * ndims[v], dims[v*MGE_MAX_DIMS ..] for every value, every node inferred
 * at b. Fails naming a symbol b lacks, or the node whose shapes do not fit. */
mge_status mge_graph_shapes(const mge_graph *g, const mge_binding *b, int *ndims, int64_t *dims, mge_error *err);
/* FLOPs (multiply-add = 2) of node i with the shapes of mge_graph_shapes. */
double mge_graph_node_flops(const mge_graph *g, int node, const int *ndims, const int64_t *dims);
/* The distinct symbols of the graph's inputs in declaration order, up to
 * max; returns how many there are. */
int mge_graph_symbols(const mge_graph *g, int64_t *syms, int max);
/* Validates the whole graph (kinds, references, order, schema). */
mge_status mge_graph_validate(const mge_graph *g, mge_error *err);
/* Fills params/state that have no data from their init spec, deterministically from seed. */
mge_status mge_graph_init_params(mge_graph *g, uint64_t seed, mge_error *err);
/* Marks which nodes are needed for the given outputs (need[nnodes]) and which
 * graph inputs they read (in_need[ninputs]). */
void mge_graph_needed(const mge_graph *g, int nout, const int *outs, char *need, char *in_need);
/* Deep copy. */
mge_graph *mge_graph_clone(const mge_graph *g, mge_error *err);
/* Whether v is optimizer state (moments, step, learning rate): a STATE
 * value named "<param>.__opt.<slot>" or "__opt.<name>". Checkpoints carry
 * it; it is not part of the model (exports, counts and --no-state leave it out). */
int mge_value_is_opt_state(const mge_value *v);
/* Parameter, state and const count and bytes; optimizer state is not counted. */
void mge_graph_param_stats(const mge_graph *g, int64_t *count, int64_t *bytes);

/* ---------------------------------------------------------------- formats */

/* .mge container (man/man5/mge-format.5). */
#define MGE_FORMAT_VERSION 2   /* the newest this build reads; it writes 1 unless symbols beyond N need 2 */
typedef struct mge_write_opts {
    int compress;       /* zlib-compress tensor data */
    int no_state;       /* drop optimizer/training state values marked as such */
} mge_write_opts;
mge_status mge_file_write(const mge_graph *g, const mge_write_opts *o, mge_buf *out, mge_error *err);
/* Parses a .mge held in buf[0..n). With borrow, uncompressed tensor data is
 * not copied: tensors point into buf, which must outlive the graph
 * (mge_model_load hands its mmap to the graph via g->mapping). */
mge_status mge_file_read(const void *buf, size_t n, int borrow, mge_graph **g, mge_error *err);
int mge_file_is_mge(const void *buf, size_t n);   /* signature check */

/* Text form (man/man5/mge-text.5). base_dir resolves `weights "FILE"`. */
/* ONNX (formats/onnx_read.c, onnx_write.c): a ModelProto into a graph
 * (dir: where external data lives, NULL refuses it; import warnings land in
 * the metadata key onnx.warnings), and an inference graph as ONNX. */
mge_status mge_onnx_read(const void *buf, size_t n, const char *dir, mge_graph **g, mge_error *err);
/* Loading options. mge plans static shapes, so an ONNX model whose
 * shape-like operands (axes, pads, sizes, K, ...) are computed from graph
 * inputs is specialized on those inputs' values: bound inputs fold like
 * constants. They stay declared inputs; the metadata onnx.bound.NAME says
 * what each was bound to. */
typedef struct mge_load_opts {
    const mge_tlist *bind;  /* input values by name (ONNX or mge spelling); NULL: none. For ONNX only */
    mge_buf *needs;         /* out when not NULL: the inputs (mge names, one a line) whose values the
                               import needed and was not given; when there are any, it failed */
    mge_buf *reads;         /* out when not NULL: the inputs the outputs depend on in the ONNX graph,
                               in input order (mge names, one a line), whether or not it failed */
} mge_load_opts;
mge_status mge_onnx_read_opts(const void *buf, size_t n, const char *dir, const mge_load_opts *o, mge_graph **g,
                              mge_error *err);
mge_status mge_onnx_write(const mge_graph *g, mge_buf *out, mge_error *err);
mge_status mge_text_parse(const char *src, size_t n, const char *base_dir, mge_graph **g, mge_error *err);
mge_status mge_text_print(const mge_graph *g, mge_buf *out, mge_error *err);

/* Loads a model by content: .mge signature or text. path "-" reads stdin.
 * .mge files are mmapped and weights borrowed from the mapping. */
mge_status mge_model_load(const char *path, mge_graph **g, mge_error *err);
mge_status mge_model_load_mem(const void *buf, size_t n, const char *base_dir, mge_graph **g, mge_error *err);
mge_status mge_model_load_opts(const char *path, const mge_load_opts *o, mge_graph **g, mge_error *err);
mge_status mge_model_load_mem_opts(const void *buf, size_t n, const char *base_dir, const mge_load_opts *o,
                                   mge_graph **g, mge_error *err);

/* NPY records, back to back, on a FILE (man: DESIGN "Tensor streams").
 * read: MGE_ERR_EOF when the stream ends before the first byte of a record;
 * MGE_ERR_FORMAT when it ends inside one. Big-endian and Fortran-order
 * records are converted to native C order. */
mge_status mge_npy_read(FILE *f, mge_tensor *t, mge_error *err);
mge_status mge_npy_read_mem(const void *buf, size_t n, size_t *used, mge_tensor *t, mge_error *err);
/* The same, but t borrows buf's bytes (not owned; buf must outlive it) when
 * they need no change (host byte order, C order, aligned, not bool): a
 * mapped file is then read only where t is used. Otherwise as read_mem. */
mge_status mge_npy_view_mem(const void *buf, size_t n, size_t *used, mge_tensor *t, mge_error *err);
mge_status mge_npy_write(FILE *f, const mge_tensor *t, mge_error *err);
mge_status mge_npy_write_buf(mge_buf *b, const mge_tensor *t, mge_error *err);
int mge_npy_is_npy(const void *buf, size_t n);

/* .npz (zip of NPY) through libarchive; a path of "-" or a pipe works. */
mge_status mge_npz_read_path(const char *path, mge_tlist *out, mge_error *err);
mge_status mge_npz_read_mem(const void *buf, size_t n, mge_tlist *out, mge_error *err);
mge_status mge_npz_write(const mge_tlist *l, mge_buf *out, mge_error *err);
int mge_npz_is_zip(const void *buf, size_t n);

/* File kinds by their first bytes (formats/sniff.c): every reader of
 * models, weights and data refuses a file of the wrong kind with the same
 * message, saying what it is and what to do instead ("this looks like an
 * ONNX model: ..."). MGE_SNIFF_BYTES leading bytes are enough for any kind. */
#define MGE_SNIFF_BYTES 512
typedef enum mge_file_kind {
    MGE_KIND_UNKNOWN = 0,   /* none of the below: text, for a model reader */
    MGE_KIND_EMPTY, MGE_KIND_MGE, MGE_KIND_NPY, MGE_KIND_NPZ, MGE_KIND_ZIP, MGE_KIND_TORCH, MGE_KIND_PICKLE,
    MGE_KIND_ONNX, MGE_KIND_SAFETENSORS, MGE_KIND_HDF5, MGE_KIND_TFLITE, MGE_KIND_IDX, MGE_KIND_GZIP,
    MGE_KIND_BZIP2, MGE_KIND_XZ, MGE_KIND_ZSTD, MGE_KIND_TAR, MGE_KIND_PNG, MGE_KIND_JPEG, MGE_KIND_GIF,
    MGE_KIND_WEBP, MGE_KIND_ELF, MGE_KIND_PDF
} mge_file_kind;
typedef enum mge_sniff_want {
    MGE_SNIFF_MODEL,        /* .mge or text */
    MGE_SNIFF_WEIGHTS,      /* .npz by name */
    MGE_SNIFF_DATA          /* what mge_dataset_load and NPY streams read */
} mge_sniff_want;
mge_file_kind mge_sniff_kind(const void *head, size_t n);
const char *mge_sniff_name(mge_file_kind k);   /* "an ONNX model" */
/* MGE_OK when kind k may be what want asks for; else an error saying what
 * it is and how to get the wanted kind from it (name: the file, quoted in
 * the advice; NULL or "-" writes FILE). */
mge_status mge_sniff_refuse(mge_file_kind k, mge_sniff_want want, const char *name, mge_error *err);
mge_status mge_sniff_check(const void *head, size_t n, mge_sniff_want want, const char *name, mge_error *err);
/* The same on the head of a regular file; stdin, pipes and files that do
 * not open are MGE_OK (their reader reports them). */
mge_status mge_sniff_path(const char *path, mge_sniff_want want, mge_error *err);

/* Parameters by name, in PyTorch's conventions. Binding reports every unknown
 * and every missing name (MGE_ERR_INVALID) unless allow_partial. */
mge_status mge_params_bind(mge_graph *g, const mge_tlist *l, int allow_partial, mge_error *err);
/* Export leaves optimizer state (names with ".__opt." or "__opt.") out: a
 * PyTorch state_dict has no such entries, so strict load_state_dict accepts the result. */
mge_status mge_params_export(const mge_graph *g, mge_tlist *out, mge_error *err);

/* Whole-file helpers used by tools: read all of path ("-" = stdin) into memory,
 * or mmap it when it is a regular file (*mapped = 1: munmap it). */
mge_status mge_file_slurp(const char *path, void **buf, size_t *n, int *mapped, mge_error *err);
void mge_file_unslurp(void *buf, size_t n, int mapped);

/* ---------------------------------------------------------------- planning and execution */

typedef struct mge_plan_stats {
    size_t arena_bytes;      /* planned arena */
    size_t lower_bound;      /* largest sum of simultaneously live bytes */
    size_t no_reuse_bytes;   /* every planned buffer separately */
    size_t workspace_bytes;  /* scratch for kernels (im2col, ...) outside the arena */
    int nbuffers;            /* planned buffers (after in-place and aliases) */
    int ninplace;            /* outputs that reuse their input's buffer */
} mge_plan_stats;

typedef struct mge_exec mge_exec;

typedef struct mge_exec_opts {
    int threads;             /* 0 = 1 */
    const char *backend;     /* "cpu" (default) or "ref" */
    int noutputs;            /* 0 = the graph's outputs */
    const int *outputs;      /* value indices */
    int training;            /* dropout active, batchnorm uses batch statistics */
    int preprocess;          /* inference only: run the nodes that depend on params, state and
                                consts alone (weight preprocessing, e.g. f16 weights cast to f32)
                                once, on the first run, and keep their results; the caller
                                promises not to change those values afterwards. Ignored when
                                training. */
    const char *device;      /* "cpu" (NULL), "sim", "cuda:0", ...: nodes the device has kernels
                                for run there, the rest on the host, with explicit copies between
                                (mge_exec_graph shows them). Params, state and consts the device
                                reads are uploaded at the first run; a caller that changes one
                                afterwards calls mge_exec_mark_changed. */
    int plan_cache;          /* plans kept, one per shape binding, least recently used dropped
                                first: 0 = 16, at most 4096 */
} mge_exec_opts;

mge_status mge_exec_create(const mge_graph *g, const mge_exec_opts *o, mge_exec **out, mge_error *err);
void mge_exec_free(mge_exec *e);
/* The graph inputs the requested outputs need, in graph input order. */
int mge_exec_ninputs(const mge_exec *e);
int mge_exec_input(const mge_exec *e, int i);      /* value index */
int mge_exec_noutputs(const mge_exec *e);
int mge_exec_output(const mge_exec *e, int i);     /* value index */
/* Runs one step. inputs[i] matches mge_exec_input(e, i) in dtype and shape;
 * symbolic dims take any value, the same for a symbol everywhere (the
 * binding may change between calls; plans are cached per binding). Shape
 * or dtype errors name the input, what was expected and what came, and a
 * symbol bound two ways names both inputs and values. */
mge_status mge_exec_run(mge_exec *e, const mge_tensor *const *inputs, mge_error *err);
/* Output i of the last run (valid until the next run or free). */
const mge_tensor *mge_exec_result(const mge_exec *e, int i);
/* Plan figures at binding b (NULL: the last run's; before any run, N = 1).
 * Symbols b lacks are an error. Builds (and caches) the plan if needed. */
mge_status mge_exec_stats(mge_exec *e, const mge_binding *b, mge_plan_stats *st, mge_error *err);
/* The plan cache: lookups that found a plan, plans built, plans held, bound. */
void mge_exec_plan_cache(const mge_exec *e, int64_t *hits, int64_t *misses, int *cached, int *cap);

/* The graph the executor runs: the caller's graph on the cpu; on another
 * device a placed copy of the needed nodes with copy nodes between devices
 * (value indices of the caller's graph are kept; node indices are not).
 * Node indices in hooks and mge_exec_live_bytes are this graph's. */
const mge_graph *mge_exec_graph(const mge_exec *e);
/* Where node i of mge_exec_graph runs: "cpu" or the device's backend name. */
const char *mge_exec_node_device(const mge_exec *e, int node);
/* Whether value v of mge_exec_graph lives on the device (not the host). */
int mge_exec_value_on_device(const mge_exec *e, int v);
/* The executor's device ("cpu", "sim", ...) and its description. */
const char *mge_exec_device(const mge_exec *e);
const char *mge_exec_device_info(const mge_exec *e);

/* Counters of a device (copies are counted by the device they go to or come from). */
typedef struct mge_devstats {
    int64_t uploads, downloads, d2d;          /* copy calls */
    int64_t upload_bytes, download_bytes, d2d_bytes;
    int64_t launches;                         /* kernels queued */
    int64_t prepared;                         /* nodes given prepared state (weights packed once) */
    size_t mem_in_use, mem_peak;              /* bytes the device allocated */
} mge_devstats;
/* The executor's device counters (all zero on the cpu), and the device's
 * part of the plan: arena bytes on the device (arena, and the lower bound
 * of what is live there at once) and persistent bytes (params, state and
 * consts uploaded once). Any pointer may be NULL. */
mge_status mge_exec_device_stats(mge_exec *e, mge_devstats *st, size_t *arena, size_t *lower_bound,
                                 size_t *persistent, mge_error *err);
/* Writes the values the device keeps and updates (trained params, moments,
 * batchnorm statistics) back into the graph's host tensors; a no-op on the
 * cpu. Call it before reading params after training steps. */
mge_status mge_exec_sync_params(mge_exec *e, mge_error *err);
/* The same for one value v of the caller's graph. */
mge_status mge_exec_sync_value(mge_exec *e, int v, mge_error *err);
/* The caller changed param/state/const value v of its graph (a learning
 * rate, a reloaded weight): the next run uploads it again. */
void mge_exec_mark_changed(mge_exec *e, int value);
/* The device names this build knows: built in, plugins it knows of and
 * plugins found on the search path ("cpu, sim, cuda"). */
const char *mge_device_names(void);
/* Whether spec ("sim", "cuda:1") names one of them. */
int mge_device_known(const char *spec);
/* Finds spec's backend (loading its plugin) and opens and closes the
 * device: the error says which plugin was looked for where, or what the
 * device's driver said. */
mge_status mge_device_check(const char *spec, mge_error *err);

/* Per-node hook (profiler, tracing): called before (phase 0) and after (phase 1)
 * each node (on a device, after the node has finished there). */
typedef void (*mge_exec_hook)(void *ud, int node, int phase);
/* Reseeds the generator of training-mode randomness (dropout). Training
 * reseeds it before every step from (seed, step), so a resumed run draws
 * the same masks as an uninterrupted one. */
void mge_exec_set_seed(mge_exec *e, uint64_t seed);
void mge_exec_set_hook(mge_exec *e, mge_exec_hook fn, void *ud);
/* Pool task hook (timelines): each thread of the executor's pool calls it
 * when it starts (phase 0) and stops (phase 1) taking tasks of one parallel
 * kernel call; thread is 0 (the caller) to threads - 1. Several threads call
 * it at once, so it must only touch per-thread state. Never called with
 * threads = 1 (there is no pool). Unset (NULL), it costs one pointer test. */
typedef void (*mge_exec_task_hook)(void *ud, int thread, int phase);
void mge_exec_set_task_hook(mge_exec *e, mge_exec_task_hook fn, void *ud);
/* Arena occupancy: live[i] gets the planned arena bytes (64-byte aligned
 * buffers, as mge_plan_stats counts them) live while node i runs at
 * binding b, its inputs and outputs included; 0 for nodes the executor
 * does not run. live has one entry per graph node. The largest entry
 * equals the plan's lower_bound. b NULL: the last run's binding. */
mge_status mge_exec_live_bytes(mge_exec *e, const mge_binding *b, size_t *live, mge_error *err);

/* Planning alone, for mge-dump: the plan of the graph's needed nodes at b. */
mge_status mge_plan_graph(const mge_graph *g, const mge_binding *b, int nout, const int *outs,
                          mge_plan_stats *st, mge_error *err);

/* ---------------------------------------------------------------- autodiff */

/* Appends to g the nodes computing d(loss)/d(wrt[i]) for a scalar f32 loss
 * value: one gradient rule per op (lib/grad_<family>.c), gradients of values
 * used several times summed with add nodes. grads[i] gets the value holding
 * the gradient (dtype and template shape of wrt[i]), or -1 when wrt[i] does
 * not influence the loss. Only nodes on a path from some wrt to the loss get
 * gradient nodes. A failing call may leave unused gradient nodes in g:
 * differentiate a clone when the graph must stay as it was. */
mge_status mge_grad_build(mge_graph *g, int loss, int nwrt, const int *wrt, int *grads, mge_error *err);

/* ---------------------------------------------------------------- passes */

/* A graph pass (lib/pass_<name>.c, registered by one line in lib/passes.c).
 * run may replace *g (it frees the old graph then); *changed tells whether
 * it rewrote anything. A failing pass leaves *g valid. */
typedef struct mge_pass {
    const char *name;
    const char *summary;
    mge_status (*run)(mge_graph **g, int *changed, mge_error *err);
} mge_pass;

int mge_pass_count(void);
const mge_pass *mge_pass_get(int i);              /* NULL when out of range */
const mge_pass *mge_pass_find(const char *name);  /* NULL when unknown */
/* The passes of preset -O<level>, comma-separated ("" for none); NULL unless 0 <= level <= 3. */
const char *mge_pass_preset(int level);
/* Runs the named passes in order, validating the graph after each. Unknown
 * names fail before anything runs, listing the known passes. *changed (may
 * be NULL) is set when any pass rewrote the graph. */
mge_status mge_passes_run(mge_graph **g, int n, const char *const *names, int *changed, mge_error *err);
/* The same with a comma-separated list ("dce,fold"); empty items are errors. */
mge_status mge_passes_run_list(mge_graph **g, const char *list, int *changed, mge_error *err);

/* ---------------------------------------------------------------- precision */

/* lib/pass_precision.c: the arithmetic of the layers (the precision
 * attribute, lib/ops.def). mge_precision_set gives every conv2d,
 * fused_conv2d and conv2d_nchwc with groups 1, linear, fused_linear, matmul
 * and scaled_dot_product_attention on f32 operands precision prec
 * (MGE_PRECISION_F32 or _BF16), except the nodes named in keep (node names,
 * or the names of their outputs), which become f32. A keep name that
 * matches no node is an error naming the close ones; one that names a node
 * the mode does not apply to is reported in *note (may be NULL; a short
 * text, "" when none). *nset: the nodes now in prec (may be NULL).
 * Depthwise and grouped convolutions and Winograd forms stay f32. */
enum { MGE_PRECISION_F32 = 0, MGE_PRECISION_BF16 = 1 };
mge_status mge_precision_set(mge_graph *g, int prec, int nkeep, const char *const *keep, int *nset, char *note,
                             size_t note_size, mge_error *err);
/* Whether node n computes in bf16 (its precision attribute); how many of g's do. */
int mge_node_bf16(const mge_node *n);
int mge_graph_bf16_count(const mge_graph *g);
/* The bf16 arithmetic this process's cpu kernels run: 2 AMX, 1
 * AVX512-BF16, 0 none (the bf16 layers compute in f32). *name (may be
 * NULL): "amx-bf16", "avx512-bf16" or "none (f32)"; *why (may be NULL): why
 * it is not AMX ("" when it is). */
int mge_cpu_bf16_kernels(const char **name, const char **why);
/* Edit distance of a and b, an adjacent swap counting as one edit (for
 * "did you mean" lists). */
size_t mge_str_distance(const char *a, size_t na, const char *b, size_t nb);

/* ---------------------------------------------------------------- misc */

/* Deterministic RNG (splitmix64 seeding xoshiro256**). */
typedef struct mge_rng { uint64_t s[4]; } mge_rng;
void mge_rng_seed(mge_rng *r, uint64_t seed);
uint64_t mge_rng_next(mge_rng *r);
float mge_rng_uniform(mge_rng *r);          /* [0, 1) */
float mge_rng_normal(mge_rng *r);           /* N(0, 1) */

double mge_now(void);                       /* monotonic seconds */

/* OpenBLAS chooses its kernels by CPU model when it is loaded; a model it
 * does not know gets its oldest (SSE3) kernels. When that happened on a CPU
 * with AVX2+FMA, returns the OPENBLAS_CORETYPE that suits it ("Haswell",
 * or "SkylakeX" with AVX-512), else NULL. The tools then re-execute
 * themselves with that variable set; programs linking libmge may do the same. */
const char *mge_blas_better_coretype(void);

/* ---------------------------------------------------------------- datasets */

/* datasets and batch loading.
 *
 * A dataset is a set of arrays with the same leading dimension (the sample
 * count), held in memory. The life of one in mge-train:
 *
 *     mge_dataset ds;
 *     mge_dataset_load("fashion-mnist", &ds, &err);        any source below
 *     mge_dataset_bind(&ds, g, nin, inputs, &opts, &err);   one array per model input
 *     mge_dataset_split(&ds, 0.1, seed, &val, &err);       optional validation split
 *     mge_loader_create(&ds, 64, 1, 0, seed, 1, &l, &err);
 *     for each epoch e: mge_loader_start(l, e, 0, &err);
 *                       while (mge_loader_next(l, &batch, &err) == MGE_OK) step(batch);
 *     mge_loader_free(l); mge_dataset_free(&ds);
 */

/* ---------------------------------------------------------------- datasets */

typedef struct mge_dataset {
    int n;              /* arrays */
    char **names;       /* per array: its name, or NULL when the source has no names (positional) */
    mge_tensor *t;      /* per array: [count, ...], owned */
    int64_t count;      /* samples; -1 for an unbound tensor stream (see stream) */
    char *source;       /* what was loaded, for messages: "fashion-mnist train", "DIR train", "d.npz",
                         * "<stdin>"; no count (it changes with bind and split): a tool prints
                         * "%s: %lld samples" with count */
    int positional;     /* bind by position, not by name: IDX pairs ("images", "labels" are
                         * descriptive only), single IDX files, tensor streams */
    int stream;         /* the arrays are the records of a tensor stream in load order, not yet
                         * grouped: record i belongs to input i % nin (bind concatenates) */
    int lengths;        /* after bind: 1 when the last array holds each sample's length (i64[count],
                         * from an array named "lengths"): variable-length sequences */
    unsigned trim;      /* after bind, with lengths: bit j set when input j's dim 1 is a symbol;
                         * the loader cuts that dim to the longest sample of each batch */
    void *map;          /* an uncompressed NPY file, mapped: arrays may borrow from it, so a
                         * sample's bytes are read from the file only when a batch uses it */
    size_t map_n;
} mge_dataset;

/* Loads a dataset. spec is one of:
 *
 *   fashion-mnist[:train|:test]
 *       /usr/share/datasets/fashion-mnist (Debian package dataset-fashion-mnist);
 *       train is the default, test is the t10k pair. Arrays "images" u8[n,28,28]
 *       and "labels" u8[n], bound by position (images -> first input).
 *   DIR[:train|:test]
 *       a directory holding IDX pairs PREFIX-images-idxK-ubyte[.gz] and
 *       PREFIX-labels-idxK-ubyte[.gz]. With one pair, that pair; with several,
 *       the train- pair (or, with :test, the t10k- or test- pair); otherwise an
 *       error lists the pairs found.
 *   PREFIX[:test]
 *       PREFIX-images-idx3-ubyte[.gz] + PREFIX-labels-idx1-ubyte[.gz]
 *       (dir/train -> dir/train-images-idx3-ubyte.gz, ...); with :test and a
 *       last component of "train", the t10k- pair next to it.
 *   FILE or "-" (stdin), recognised by content (gzip is undone first):
 *       IDX        one array, positional;
 *       NPY        a tensor stream: records back to back, stored in load order
 *                  (positional, stream = 1, count = -1 until bind groups them);
 *       .npz       (a zip whose name ends in .npz) arrays by name;
 *       tar, zip   (also .tar.gz, and what libarchive's filters undo: bz2, xz):
 *                  member NAME.npy is array NAME; members DIR/ANY.npy are shards
 *                  of array DIR (DIR may itself contain '/'), concatenated along
 *                  axis 0 in sorted member-name order. Members that are not
 *                  .npy are errors, except directories and hidden files (".x",
 *                  "__MACOSX/"). A name given both ways is an error. Names
 *                  with "..", absolute or drive names, and members that are
 *                  links, devices or FIFOs are refused, hidden or not.
 *   Compressed data inflates within the bounds of formats/unpack.h.
 *
 * Errors name the file: missing file, unknown format, arrays with different
 * sample counts (except unbound streams), an empty dataset (0 samples, or
 * no arrays), unsupported dtypes (f64 NPY: save float32). IDX i16 is widened
 * to i32 and f64 narrowed to f32. On failure ds is zeroed. */
mge_status mge_dataset_load(const char *spec, mge_dataset *ds, mge_error *err);
void mge_dataset_free(mge_dataset *ds);   /* zeroes ds; safe on a zeroed ds */

typedef struct mge_data_opts {
    int normalize;          /* apply mean/std below to float-converted u8 data */
    float mean, std;        /* e.g. 0.2860, 0.3530 for Fashion-MNIST */
} mge_data_opts;

/* Makes ds hold exactly one array per model input, in the order inputs[0..nin),
 * each converted to that input's dtype and per-sample shape (the graph value's
 * template shape with the batch dim MGE_DIM_N at position 0); names become the
 * input names. o may be NULL (no normalization).
 *
 * Matching: a named dataset binds by name; every input must have an array
 * of its exact name (else an error lists the missing inputs and the arrays
 * there are). Arrays that no input asks for are dropped: each input still
 * gets the array of its own name, so nothing trains on the wrong data, and
 * a tool may bind a subset of a model's inputs (inference without labels).
 * A positional dataset (IDX) binds array i -> input i; it needs at least
 * nin arrays and drops the rest (images, labels -> x alone). An unbound
 * stream must have a multiple of nin records: record i -> input i % nin,
 * the records of one input concatenated along axis 0.
 *
 * Conversions: u8 -> float input: x / 255, then (x - mean) / std when
 * o->normalize. Other integers (i8, i32, i64, bool) -> float: the value.
 * Float -> float: the value (f32, f16, bf16). Integer -> integer: the value,
 * which must fit (an error names the first that does not). Float -> integer
 * and quantized dtypes are errors. The per-sample shape may differ from the
 * input's only by size-1 dims ([n,28,28] fits [N,1,28,28]).
 * Sample count 0 is the error "empty dataset". On failure ds is unchanged. */
mge_status mge_dataset_bind(mge_dataset *ds, const mge_graph *g, int nin, const int *inputs,
                            const mge_data_opts *o, mge_error *err);

/* Moves a fraction frac (0 < frac < 1) of the samples, chosen by a shuffle
 * seeded by seed, into val (a new dataset with the same names and kind). Both
 * parts keep the original order of their samples. Each part gets at least one
 * sample (round(frac * count), clamped), else MGE_ERR_INVALID. Not for
 * unbound streams. On failure ds is unchanged and val zeroed. */
mge_status mge_dataset_split(mge_dataset *ds, double frac, uint64_t seed, mge_dataset *val, mge_error *err);

/* Smallest and largest value of integer array i (the labels' class range).
 * MGE_ERR_INVALID for a float array, an index out of range or no elements. */
mge_status mge_dataset_label_range(const mge_dataset *ds, int i, int64_t *min, int64_t *max);

/* ---------------------------------------------------------------- loader */

typedef struct mge_loader mge_loader;

/* Batches over a bound dataset, which must outlive the loader and not change.
 * shuffle: a permutation per epoch derived only from (seed, epoch)
 * (Fisher-Yates with mge_rng seeded from a mix of seed and epoch), so
 * resuming at (epoch, batch) reproduces the same order; without shuffle the
 * samples come in order. drop_last drops a final partial batch (then a
 * dataset smaller than one batch is an error). prefetch: gather the next
 * batch on a background thread while the caller uses the current one; the
 * batches are the same bytes either way. */
mge_status mge_loader_create(const mge_dataset *ds, int64_t batch, int shuffle, int drop_last, uint64_t seed,
                             int prefetch, mge_loader **out, mge_error *err);
int64_t mge_loader_batches(const mge_loader *l);          /* batches per epoch */
/* Begins epoch `epoch` (>= 0) at batch index first_batch (0 <= first_batch <=
 * batches; == batches means the epoch is already over). A next() without a
 * start begins epoch 0 at batch 0. */
mge_status mge_loader_start(mge_loader *l, int64_t epoch, int64_t first_batch, mge_error *err);
/* The next batch of the current epoch: (*batch)[i] for array i, dims[0] the
 * rows in this batch (the last may be short), valid until the next call to
 * next, start or free. MGE_ERR_EOF at the end of the epoch (and after). */
mge_status mge_loader_next(mge_loader *l, const mge_tensor *const **batch, mge_error *err);
void mge_loader_free(mge_loader *l);                      /* joins the thread; NULL is fine */
/* Data parallel: next() hands out only rows [M*part/parts, M*(part+1)/parts)
 * of each batch of M rows (the same batches and order as one part), and
 * gathers only those, so with a dataset that borrows from its file (see
 * mge_dataset) a process reads only its own samples. Before the first
 * start or next. mge_loader_batch_rows: M of the batch next() handed last. */
mge_status mge_loader_set_part(mge_loader *l, int part, int parts, mge_error *err);
int64_t mge_loader_batch_rows(const mge_loader *l);

/* ---------------------------------------------------------------- readers the loader uses */

/* An IDX file in buf[0..n): raw, or gzip (recognised by its magic). Big-endian
 * data is converted to native order; i16 becomes i32, f64 becomes f32. Every
 * length is checked against n: truncation, trailing bytes, ndim 0, dims whose
 * product overflows are MGE_ERR_FORMAT. t is overwritten (owned). */
mge_status mge_idx_read_mem(const void *buf, size_t n, mge_tensor *t, mge_error *err);
/* The same from a file ("-" = stdin); messages start with the path. */
mge_status mge_idx_read_path(const char *path, mge_tensor *t, mge_error *err);
int mge_idx_is_idx(const void *buf, size_t n);   /* magic: 0, 0, a known dtype, ndim >= 1 */
/* Decompresses gzip (one or more members) in buf[0..n) into a malloc'ed
 * *out of *outn bytes; fails beyond limit bytes of output (0: none given)
 * and always beyond 100 * n or 256 MiB, whichever is more (formats/unpack.h). */
mge_status mge_gunzip_mem(const void *buf, size_t n, size_t limit, void **out, size_t *outn, mge_error *err);
int mge_is_gzip(const void *buf, size_t n);

/* Checks that a hand-built or freshly read dataset is consistent and sets
 * ds->count: every array has a leading (sample) dimension of the same size,
 * which is not 0 ("empty dataset"). Streams (ds->stream) only need >= 1
 * record; their count stays -1. Messages start with what. */
mge_status mge_dataset_check(mge_dataset *ds, const char *what, mge_error *err);

/* tar or zip (any libarchive filter) of NPY members, as mge_dataset_load
 * describes, from buf[0..n); what names the source in messages. */
mge_status mge_dataset_load_archive_mem(const void *buf, size_t n, const char *what, mge_dataset *ds,
                                        mge_error *err);

/* ---------------------------------------------------------------- optimizers and schedules */

/* optimizers and learning-rate schedules (part of the public
 * API; included at the end of mge.h).
 *
 * The optimizer is part of the training graph: mge_optim_build appends, after
 * the forward and gradient nodes, one update node per parameter (sgd or adam,
 * lib/ops.def) that changes the parameter and its optimizer state in place,
 * and optionally the nodes of gradient clipping by global L2 norm. The state
 * values carry ".__opt." in their names, so a .mge written with no_state drops
 * them and one written without keeps them, and training resumes exactly.
 * Update rules are PyTorch's (torch.optim.SGD, Adam, AdamW; clip_grad_norm_). */

typedef enum { MGE_OPTIM_SGD, MGE_OPTIM_ADAM, MGE_OPTIM_ADAMW } mge_optim_kind;

typedef struct mge_optim_opts {
    mge_optim_kind kind;
    double lr, momentum, dampening, weight_decay, beta1, beta2, eps;
    int nesterov;
    double clip_norm;          /* > 0: clip gradients by global L2 norm (clip_grad_norm_) */
} mge_optim_opts;

/* PyTorch's defaults for kind. SGD: lr 0.01 (torch.optim.SGD has no default
 * lr in 1.13; 0.01 is what later versions use), momentum 0, dampening 0,
 * weight_decay 0. Adam: lr 0.001, betas (0.9, 0.999), eps 1e-8,
 * weight_decay 0. AdamW: the same but weight_decay 0.01. clip_norm 0 (off). */
void mge_optim_defaults(mge_optim_kind kind, mge_optim_opts *o);

/* Checks o as PyTorch's constructors do (lr >= 0, momentum >= 0,
 * weight_decay >= 0, 0 <= beta < 1, eps >= 0, nesterov needs momentum > 0
 * and dampening 0, clip_norm >= 0, everything finite). */
mge_status mge_optim_check(const mge_optim_opts *o, mge_error *err);

/* Appends the optimizer to g, which already holds the forward and gradient
 * nodes (grads[i] is d(loss)/d(params[i]), from mge_grad_build):
 *  - the state value "__opt.hyper" f32[2] = {lr, step} (mge_optim_set_hyper),
 *    created as {o->lr, 1};
 *  - per param p: "<p>.__opt.momentum_buffer" (sgd with momentum), or
 *    "<p>.__opt.exp_avg" and "<p>.__opt.exp_avg_sq" (adam, adamw), zeroed;
 *  - with clip_norm > 0: sumsq nodes over at most 64 gradients each, add
 *    nodes when there are more than 64 of those, and one clip_coef node whose
 *    output scales every gradient (NaN when the norm is not finite: the
 *    updates turn NaN and the trainer's NaN check stops the run);
 *  - one update node per param, after everything else; updates[i] gets its
 *    output (f32 scalar: the squared L2 norm of the applied update), *hyper
 *    the hyper value. The executor runs only what its outputs need, so a
 *    training step requests the updates[] values as outputs (their sum is
 *    the squared norm of the whole step, a cheap divergence signal).
 * State values that already exist (a resumed model) are reused when their
 * kind, dtype and shape fit, keeping their data. A param whose grads[i] is
 * -1 (it does not influence the loss) gets no update: updates[i] = -1, as
 * PyTorch skips parameters without a gradient. Params must be f32. On
 * failure g may hold some of the new values and nodes, unused. */
mge_status mge_optim_build(mge_graph *g, const mge_optim_opts *o, int n, const int *params, const int *grads,
                           int *updates, int *hyper, mge_error *err);

/* Writes lr and step (the 1-based number of the coming update) into the
 * hyper state tensor before a run. step travels as f32, exact up to 2^24. */
mge_status mge_optim_set_hyper(mge_graph *g, int hyper, double lr, int64_t step, mge_error *err);

/* ---------------------------------------------------------------- schedules */

enum { MGE_SCHED_CONSTANT = 0, MGE_SCHED_STEP, MGE_SCHED_COSINE };

typedef struct mge_sched {
    int kind;                  /* MGE_SCHED_* */
    double base_lr, gamma, min_lr;
    int64_t step_size, warmup, total;
} mge_sched;

/* spec: "constant" | "step:EVERY[:GAMMA]" (lr *= GAMMA every EVERY steps,
 * PyTorch's StepLR; GAMMA defaults to 0.1) | "cosine[:MIN_LR]" (PyTorch's
 * CosineAnnealingLR from base_lr to MIN_LR, default 0, over total steps).
 * NULL means "constant". warmup > 0: linear warm-up, the schedule's lr times
 * step/warmup for the first warmup steps. Bad specs fail quoting the spec
 * and the accepted forms. */
mge_status mge_sched_parse(const char *spec, double base_lr, int64_t warmup, int64_t total, mge_sched *s,
                           mge_error *err);
/* The lr of 1-based step (steps < 1 count as 1; cosine stays at MIN_LR after total). */
double mge_sched_lr(const mge_sched *s, int64_t step);

/* ---------------------------------------------------------------- training */

/* the training step as one graph.
 *
 * A trainer owns a deep copy of the model extended with the gradient nodes
 * (mge_grad_build) and the optimizer updates (mge_optim_build), and two
 * executors over it: training mode (forward, backward, update) and eval mode
 * (forward only, for validation). Parameters, running statistics and
 * optimizer moments live in the trainer's copy; mge_trainer_export writes
 * them back into a model for saving. */

typedef struct mge_trainer mge_trainer;

/* ---- distributed training: a communicator is a table of collective
 * operations over the ranks of one job (rank 0..size-1), implemented by a
 * tool over an existing engine (MPI: cmd/train_mpi.c) or by a backend
 * (NCCL under CUDA); libmge only calls through it and never links one.
 * Every operation is collective: all ranks call it in the same order.
 * Operations that wait give up with MGE_ERR_IO (naming the wait) after the
 * implementation's timeout, so a dead rank cannot hang the others. */
typedef struct mge_comm mge_comm;
struct mge_comm {
    int rank, size;
    void *ud;                /* the implementation's */
    /* start the sum over the ranks of buf[0..n) in place; *req for test/wait */
    mge_status (*iallreduce)(mge_comm *c, float *buf, int64_t n, void **req, mge_error *err);
    /* *done = 1 when req completed (req is then released); progresses it */
    mge_status (*test)(mge_comm *c, void *req, int *done, mge_error *err);
    mge_status (*wait)(mge_comm *c, void *req, mge_error *err);
    /* blocking sum of n doubles in place (statistics, counts) */
    mge_status (*allreduce_f64)(mge_comm *c, double *buf, int64_t n, mge_error *err);
    /* root's buf[0..n) to every rank */
    mge_status (*bcast)(mge_comm *c, void *buf, size_t n, int root, mge_error *err);
    /* all[r * k + j] = rank r's mine[j] */
    mge_status (*allgather_u64)(mge_comm *c, const uint64_t *mine, int k, uint64_t *all, mge_error *err);
};

typedef struct mge_train_opts {
    mge_optim_opts optim;
    int threads;             /* 0 = 1 */
    const char *backend;     /* NULL = "cpu" */
    const char *device;      /* NULL = "cpu"; see mge_exec_opts */
    uint64_t seed;           /* training-mode randomness (dropout): reseeded from (seed, step) every step */
    int guard;               /* keep only finite steps: see mge_trainer_step */
    int64_t guard_every;     /* guard: snapshot every that many steps (0: spaced by time, see mge_trainer_step) */
    /* data parallel (comm with size > 1): the gradients are summed over the
     * ranks (each weighted by mge_trainer_set_share) in buckets of about
     * bucket_mb MiB (0: 25), each started as soon as its gradients exist;
     * the cpu device only */
    mge_comm *comm;
    double bucket_mb;
    int sync_bn;             /* batchnorm statistics over all ranks (sync_batchnorm in the training graph) */
} mge_train_opts;

typedef struct mge_train_result {
    double loss;
    int64_t correct;         /* argmax(logits) == label, when the loss is cross_entropy; else -1 */
    int64_t count;           /* samples in the batch */
} mge_train_result;

/* model: a graph with a loss (`minimize`) and data for every param and state
 * value. Optimizer state already in the model ("<param>.__opt.*",
 * "__opt.hyper", as written by mge_trainer_export) is reused, so training resumes. */
mge_status mge_trainer_create(const mge_graph *model, const mge_train_opts *o, mge_trainer **out, mge_error *err);
void mge_trainer_free(mge_trainer *t);
/* The model's graph inputs (value indices of the model graph, declaration
 * order): batches are passed in this order. */
int mge_trainer_ninputs(const mge_trainer *t);
int mge_trainer_input(const mge_trainer *t, int i);
/* Classes of a cross_entropy loss (logits' dim 1), or 0. */
int64_t mge_trainer_classes(const mge_trainer *t);
/* One step: forward, backward, update with learning rate lr; step is the
 * 1-based number of this update (Adam's bias correction, SGD's first step).
 * With opts.guard, a step whose loss is not finite, or whose update leaves a
 * param or a state value other than the optimizer moments non-finite, fails
 * with MGE_ERR_NONFINITE ("step S: the update made parameter P non-finite
 * ...", the first such value in parameter order). After a failed step, of
 * this kind or any other, the trainer holds the params and state of the
 * step mge_trainer_good_step names: a snapshot taken before this or an
 * earlier step. The snapshot (one copy of the params and state a step writes) is
 * renewed when the steps since the last one took about 200 times as long as
 * copying it, or every opts.guard_every steps; to continue from the step
 * just before the failure, run the steps after the good one again with the
 * same batches (they give the same bits). The check reads the update norms
 * the update nodes output (finite when the update is) and scans a tensor
 * only behind a non-finite norm, plus the non-optimizer state (running
 * statistics) every step. guard also refuses, at create, a model whose
 * params or state are already non-finite (MGE_ERR_NONFINITE). */
mge_status mge_trainer_step(mge_trainer *t, const mge_tensor *const *batch, double lr, int64_t step,
                            mge_train_result *r, mge_error *err);
/* With the guard, after a failed step: the step number (as passed to
 * mge_trainer_step; the state after it) whose params and state the trainer
 * holds; -1 without the guard or before the first step. */
int64_t mge_trainer_good_step(const mge_trainer *t);
/* Forward only in eval mode (dropout off, batchnorm running statistics). */
mge_status mge_trainer_eval(mge_trainer *t, const mge_tensor *const *batch, mge_train_result *r, mge_error *err);
/* Plan figures of the training step at binding b (arena against its lower bound). */
mge_status mge_trainer_stats(mge_trainer *t, const mge_binding *b, mge_plan_stats *st, mge_error *err);
/* Per-node hook on the training-mode executor (profilers): node indices
 * refer to mge_trainer_graph(t). */
void mge_trainer_set_hook(mge_trainer *t, mge_exec_hook fn, void *ud);
/* The training-mode executor itself (plan figures, hooks). */
mge_exec *mge_trainer_exec(mge_trainer *t);
/* The training graph (forward + backward + update), for inspection. */
const mge_graph *mge_trainer_graph(const mge_trainer *t);
/* A copy of model with the trained params and state; with_opt also adds the
 * optimizer state so that mge_trainer_create on the result resumes. A param
 * or state value it would write that holds NaN or inf fails with
 * MGE_ERR_NONFINITE naming it (nothing is exported). */
mge_status mge_trainer_export(const mge_trainer *t, const mge_graph *model, int with_opt, mge_graph **out,
                              mge_error *err);
/* Distributed training (opts.comm): this rank's weight in the gradient sum
 * of the next steps, its samples over the global batch's (default 1/size). */
void mge_trainer_set_share(mge_trainer *t, double share);
/* Every param and state value (optimizer moments too) from rank root. */
mge_status mge_trainer_bcast(mge_trainer *t, int root, mge_error *err);
/* The state other than the optimizer's (batchnorm running statistics) from
 * rank root: per-rank statistics stay rank root's on every rank (PyTorch
 * DDP's broadcast_buffers). Nothing to do without such state. */
mge_status mge_trainer_bcast_stats(mge_trainer *t, int root, mge_error *err);
/* A 64-bit hash of the bytes of every param and state value, in graph
 * order (ranks compare it: they must hold the same bits). */
mge_status mge_trainer_hash(mge_trainer *t, uint64_t *h, mge_error *err);
/* Communication so far: per bucket, its bytes, the seconds from its start
 * to its completion and the seconds the step waited for it (the part the
 * backward pass did not hide). n: buckets; arrays of at least n. */
typedef struct mge_comm_stats {
    int nbuckets;
    int64_t steps;
    const int64_t *bytes;
    const double *comm_s, *wait_s;
    const int *members;      /* gradients per bucket */
} mge_comm_stats;
int mge_trainer_comm_stats(const mge_trainer *t, mge_comm_stats *st);   /* 0: not distributed */

/* Rows of f32 logits [N,C] whose argmax (first on ties) equals the i32/i64
 * label [N]; -1 when the shapes or dtypes do not fit. */
int64_t mge_count_correct(const mge_tensor *logits, const mge_tensor *labels);


/* ---------------------------------------------------------------- quantization calibration
 * One tensor's observed values during calibration (quant_calib.c). Two passes
 * over the data: mge_qobs_range (min/max of the finite values, counting the
 * non-finite ones), then, for percentile and entropy only, mge_qobs_hist.
 * The first hist call freezes the binning from the range seen so far: 2048
 * bins over [mn, mx] (percentile) and 2048 bins of |x| over
 * [0, max(|mn|, |mx|)] (entropy; kept separately so that neither loses
 * resolution to re-binning). Values outside a frozen range go to the edge
 * bins; NaN and inf are skipped. */
typedef struct mge_qobs mge_qobs;
typedef enum { MGE_CALIB_MINMAX = 0, MGE_CALIB_PERCENTILE, MGE_CALIB_ENTROPY } mge_calib_method;
#define MGE_QOBS_BINS 2048
mge_qobs *mge_qobs_new(void); /* NULL when out of memory */
void mge_qobs_free(mge_qobs *o);
void mge_qobs_range(mge_qobs *o, const float *x, int64_t n);
void mge_qobs_hist(mge_qobs *o, const float *x, int64_t n);
int64_t mge_qobs_nonfinite(const mge_qobs *o);
int64_t mge_qobs_count(const mge_qobs *o); /* finite values seen by mge_qobs_range */
void mge_qobs_minmax(const mge_qobs *o, double *mn, double *mx); /* 0, 0 when nothing seen */
/* The real range [lo, hi] to quantize to; lo <= 0 <= hi always.
 * minmax: [min(mn, 0), max(mx, 0)].
 * percentile P in (50, 100]: hi = the P-th percentile, lo = the (100-P)-th,
 *   interpolated inside a bin of the histogram (exact mn, mx at 100), widened to 0.
 * entropy (TensorRT's KL calibration): over the |x| histogram, the threshold
 *   T = i bins (i from 128 to 2048, every bin) minimizing KL(P || Q), P the
 *   first i bins with the rest folded into bin i-1, Q the unclipped first i
 *   bins merged into `levels` chunks and spread back over P's non-empty bins
 *   (normalized by all values, so clipping costs: see quant_calib.c).
 *   levels = 255 when mn >= 0 (range [0, T]), else 127
 *   (range [max(mn, -T), min(mx, T)] widened to 0).
 * A tensor of zeros gets [0, 0]. MGE_ERR_INVALID: nothing observed, no
 * histogram for percentile/entropy, percentile out of range. */
mge_status mge_qobs_choose(const mge_qobs *o, mge_calib_method m, double percentile, double *lo, double *hi,
                           mge_error *err);
int mge_calib_needs_hist(mge_calib_method m);
/* "minmax", "percentile", "entropy" -> *m; 0 when unknown. */
int mge_calib_parse(const char *s, mge_calib_method *m);


/* ---------------------------------------------------------------- quantization */

/* mge-quant's rewrite (lib/quantize.c): see the top of that file and the
 * int8 ops in lib/ops.def. */
typedef struct mge_quant_opts {
    int per_tensor;              /* one weight scale per tensor, not per output channel */
    int nskip;
    const char *const *skip;     /* node names that stay f32 */
    int int8_outputs;            /* model outputs written by int8 nodes stay qs8 */
} mge_quant_opts;

typedef struct mge_quant_entry { /* one int8 node of the result */
    char *node;                  /* its name */
    int op;                      /* qconv2d, qlinear, qadd or the qs8 pass-through op */
    char *value;                 /* the qs8 value it writes */
    int ref_value;               /* the value of the input graph that value stands for */
    double scale;                /* of the output */
    int zero;
    double wscale_min, wscale_max; /* weight scales (qconv2d, qlinear), else 0 */
} mge_quant_entry;

typedef struct mge_quant_result {
    int n;
    mge_quant_entry *e;
    mge_buf log;                 /* one line per decision: nodes kept f32 and why, quantize/dequantize inserted */
} mge_quant_result;

/* g: an f32 inference graph of plain ops (mge-quant runs strip-training,
 * fold-bn, unfuse first). lo[v], hi[v]: the calibrated range of every value
 * (NaN when not observed; such values stay f32). *out: the int8 graph;
 * res (may be NULL) what became int8. Fails on an already quantized model
 * and on skip names that are not nodes of g. */
mge_status mge_quant_rewrite(const mge_graph *g, const double *lo, const double *hi, const mge_quant_opts *o,
                             mge_graph **out, mge_quant_result *res, mge_error *err);
void mge_quant_result_free(mge_quant_result *r);
/* 1 when g has an int8 op or a qs8/qs32 value (*what names it). */
int mge_quant_is_quantized(const mge_graph *g, const char **what);

#ifdef __cplusplus
}
#endif
#endif
