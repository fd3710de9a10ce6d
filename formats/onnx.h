/* onnx.h — what the ONNX reader, its op converters and the writer share.
 *
 * The schema is Debian's onnx.proto (libonnx-dev), compiled by protoc-c at
 * build time into $(B)/gen/onnx.pb-c.[ch]; nothing here parses protobuf by
 * hand. The reader (onnx_read.c) decodes a ModelProto, makes graph inputs,
 * initializers and Constant nodes into values, and hands every node to the
 * converter its op_type names (onnx_ops*.c: one table per file, joined in
 * onnx_ops.c). A converter reads the node's inputs and attributes through the
 * helpers below and emits mge nodes; what it cannot express it reports with
 * mge_onnx_unsupported, and the reader lists every such node at once. */
#ifndef MGE_ONNX_H
#define MGE_ONNX_H

#include "internal.h"
#include "onnx.pb-c.h"

#include <stdarg.h>

/* The opsets this reader knows (default domain). A model's opset is the
 * newest version of each op it may use: opset 1 to 6 models whose ops did
 * not change since are read too (each table entry says since when). */
#define MGE_ONNX_OPSET_MIN 1
#define MGE_ONNX_OPSET_MAX 21

/* ONNX TensorProto.DataType codes mge reads. */
enum {
    MGE_ONNX_FLOAT = 1, MGE_ONNX_UINT8 = 2, MGE_ONNX_INT8 = 3, MGE_ONNX_UINT16 = 4, MGE_ONNX_INT16 = 5,
    MGE_ONNX_INT32 = 6, MGE_ONNX_INT64 = 7, MGE_ONNX_STRING = 8, MGE_ONNX_BOOL = 9, MGE_ONNX_FLOAT16 = 10,
    MGE_ONNX_DOUBLE = 11, MGE_ONNX_UINT32 = 12, MGE_ONNX_UINT64 = 13, MGE_ONNX_BFLOAT16 = 16
};

typedef struct mge_onnx_ctx mge_onnx_ctx;
typedef const Onnx__NodeProto mge_onnx_node;

/* A converter: emits the node's mge equivalent. MGE_ERR_UNSUPPORTED (what
 * mge_onnx_unsupported returns) puts the node on the unsupported list and
 * the reader goes on to find the others; any other error is a hard error
 * about the model (c's error is set). */
typedef mge_status (*mge_onnx_conv_fn)(mge_onnx_ctx *c, mge_onnx_node *n);

typedef struct mge_onnx_op {
    const char *type;        /* ONNX op_type */
    mge_onnx_conv_fn fn;
    int since;               /* the oldest opset whose version of the op fn handles (older: unsupported);
                                newer versions' differences are fn's to handle (c->opset) */
} mge_onnx_op;

/* Each onnx_ops_<group>.c defines one table ending with {NULL, NULL}. */
extern const mge_onnx_op mge_onnx_ops_core[];
extern const mge_onnx_op mge_onnx_ops_math[];
extern const mge_onnx_op mge_onnx_ops_reduce[];
extern const mge_onnx_op mge_onnx_ops_nn[];
extern const mge_onnx_op mge_onnx_ops_rnn[];
extern const mge_onnx_op mge_onnx_ops_loss[];
extern const mge_onnx_op mge_onnx_ops_shape[];
extern const mge_onnx_op mge_onnx_ops_extra_math[];
extern const mge_onnx_op mge_onnx_ops_spatial[];
extern const mge_onnx_op mge_onnx_ops_quant[];   /* onnx_ops_quant.c */
extern const mge_onnx_op mge_onnx_ops_pool3d[];
/* The table entry of op_type, or NULL (onnx_ops.c). */
const mge_onnx_op *mge_onnx_find_op(const char *type);

struct mge_onnx_ctx {
    mge_graph *g;
    mge_error *err;
    int64_t opset;           /* of the default domain */
    void *names;             /* ONNX value name -> value index (onnx_read.c) */
    int nunsupported;
    mge_buf unsupported;     /* one line per unsupported node */
    int fresh;               /* counter for the names of helper values */
    mge_buf warnings;        /* newline-separated, for the tools to print */
    /* onnx_fold.c */
    void *fold;              /* folded values (mge_onnx_fold) */
    mge_buf needs;           /* graph inputs whose values the import needs, one a line */
};

/* ---- inputs */
/* How many inputs the node has, trailing empty names not counted. */
int mge_onnx_nin(mge_onnx_node *n);
/* Value index of input i, or -1 when absent (beyond nin, or an empty name). */
int mge_onnx_in(mge_onnx_ctx *c, mge_onnx_node *n, int i);
/* The value's data when it is a constant (an initializer, a Constant node or
 * a folded value), else NULL. */
const mge_tensor *mge_onnx_data(mge_onnx_ctx *c, int v);
/* The elements of value v when known at import (constant data, or shape
 * arithmetic whose result is the same whatever the symbols are), as
 * doubles (integers exact below 2^53): up to max into vals, count into *cnt.
 * Fails naming what of node n it is. */
mge_status mge_onnx_known(mge_onnx_ctx *c, mge_onnx_node *n, int v, const char *what, double *vals, int max,
                          int *cnt);
/* The same for an integer vector, into int64s. */
mge_status mge_onnx_known_ints(mge_onnx_ctx *c, mge_onnx_node *n, int v, const char *what, int64_t *vals,
                               int max, int *cnt);
/* Value v's data when mge computes it from constants at import (small
 * tensors only, onnx_fold.c), else NULL. mge_onnx_data folds through it. */
const mge_tensor *mge_onnx_fold(mge_onnx_ctx *c, int v);
/* A const standing for folded value v (made once), or v when not folded:
 * the emit helpers pass folded inputs as consts. */
int mge_onnx_fold_const(mge_onnx_ctx *c, mge_onnx_node *n, int v);
void mge_onnx_fold_free(mge_onnx_ctx *c);
/* v is needed known at import but is not: notes the graph inputs whose
 * values it depends on (c->needs), for the reader's report and binding. */
void mge_onnx_note_needs(mge_onnx_ctx *c, int v);
/* Value v's dtype, rank and template dims. */
const mge_value *mge_onnx_value(mge_onnx_ctx *c, int v);
/* Makes an initializer a trainable parameter (the weights of a layer) or,
 * with state = 1, persistent state (BatchNorm's running statistics). Does
 * nothing to values that are not initializers. */
void mge_onnx_make_param(mge_onnx_ctx *c, int v, int state);

/* ---- attributes */
const Onnx__AttributeProto *mge_onnx_attr(mge_onnx_node *n, const char *name);
int64_t mge_onnx_attr_i(mge_onnx_node *n, const char *name, int64_t def);
double mge_onnx_attr_f(mge_onnx_node *n, const char *name, double def);
/* INTS (or a single INT): the count, up to max into v; -1 when absent. */
int mge_onnx_attr_ints(mge_onnx_node *n, const char *name, int64_t *v, int max);
int mge_onnx_attr_floats(mge_onnx_node *n, const char *name, double *v, int max);
/* STRING (def when absent) into buf, NUL-terminated, truncated to bn; returns buf. */
const char *mge_onnx_attr_s(mge_onnx_node *n, const char *name, const char *def, char *buf, size_t bn);

/* ---- mge attributes */
mge_attr mge_onnx_ai(int key, int64_t v);
mge_attr mge_onnx_ais(int key, int cnt, const int64_t *v);
mge_attr mge_onnx_af(int key, double v);
mge_attr mge_onnx_ab(int key, int v);
mge_attr mge_onnx_aop(int key, int op);     /* an OPS attribute of one op (act=relu) */

/* ---- emitting */
/* Adds an mge node whose outputs become the node's outputs 0..nout).
 * Returns the mge node index, or -1 (c's error set, naming the node). */
int mge_onnx_emit(mge_onnx_ctx *c, mge_onnx_node *n, int op, int nin, const int *in, int nattr,
                  const mge_attr *attrs, int nout);
/* Adds an mge node with one output under a fresh name (a step of a
 * lowering); returns the output's value index or -1. */
int mge_onnx_emit_tmp(mge_onnx_ctx *c, mge_onnx_node *n, int op, int nin, const int *in, int nattr,
                      const mge_attr *attrs);
/* Both take an input < 0 as a failed earlier step of the same lowering
 * (its error already set) and return -1 without emitting, so a chain of
 * steps needs one check, at its end. */
int mge_onnx_emit2(mge_onnx_ctx *c, mge_onnx_node *n, int op, int a, int b);   /* a binary step */
/* The last step: mge_onnx_emit of one output, as a status. */
mge_status mge_onnx_finish(mge_onnx_ctx *c, mge_onnx_node *n, int op, int nin, const int *in, int nattr,
                           const mge_attr *attrs);
int mge_onnx_reshape_tmp(mge_onnx_ctx *c, mge_onnx_node *n, int x, int nd, const int64_t *shape);
int mge_onnx_transpose_tmp(mge_onnx_ctx *c, mge_onnx_node *n, int x, int nd, const int64_t *perm);
/* "'NAME' (Op)", or "Op -> 'OUTPUT'" for a node without a name, into b. */
const char *mge_onnx_node_label(mge_onnx_node *n, char *b, size_t bn);
/* The node's output k is the existing value v (Identity, inference Dropout). */
mge_status mge_onnx_alias(mge_onnx_ctx *c, mge_onnx_node *n, int k, int v);
/* A new const value under a fresh name, holding t (taken over: zeroed). */
int mge_onnx_const(mge_onnx_ctx *c, mge_onnx_node *n, mge_tensor *t);
int mge_onnx_const_named(mge_onnx_ctx *c, const char *base, mge_tensor *t);   /* a fresh name from base */
int mge_onnx_const_i64(mge_onnx_ctx *c, mge_onnx_node *n, int cnt, const int64_t *v);   /* 1-D */
int mge_onnx_const_f32(mge_onnx_ctx *c, mge_onnx_node *n, int ndim, const int64_t *dims, const float *v);
/* Records the node as unsupported (reason: printf-style); returns MGE_ERR_UNSUPPORTED. */
mge_status mge_onnx_unsupported(mge_onnx_ctx *c, mge_onnx_node *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A hard error about node n: "node 'NAME' (Op): ..."; returns MGE_ERR_INVALID. */
mge_status mge_onnx_fail(mge_onnx_ctx *c, mge_onnx_node *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* An import warning (the tools print them). */
void mge_onnx_warn(mge_onnx_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A normalised axis: a in [-rank, rank) -> [0, rank); -1 when out of range. */
int mge_onnx_axis(int64_t a, int rank);

/* ---- tensors */
/* A TensorProto's contents as an mge tensor: borrowed from the message's
 * raw_data when it can be (64-byte aligned: the reader's allocator), else
 * converted into owned data. dir: where external data lives (NULL refuses
 * external data). */
mge_status mge_onnx_tensor(const Onnx__TensorProto *tp, const char *dir, mge_tensor *t, mge_error *err);
/* ONNX data type -> mge dtype; -1 when mge has none. */
int mge_onnx_dtype(int onnx_type);
/* mge dtype -> ONNX data type; 0 when ONNX has none. */
int mge_onnx_dtype_to(int mge_dt);
const char *mge_onnx_dtype_name(int onnx_type);

/* ---- shared by converters */
/* ONNX pads (or auto_pad) of an nsp-d window over spatial dims in[]: begin
 * and end per dim. SAME_* needs in[] known. */
mge_status mge_onnx_pads(mge_onnx_ctx *c, mge_onnx_node *n, int nsp, const int64_t *in, const int64_t *k,
                         const int64_t *s, const int64_t *d, int64_t *pb, int64_t *pe);
/* x padded with value on its trailing nsp dims (a pad node), or x when no pad. */
int mge_onnx_pad_input(mge_onnx_ctx *c, mge_onnx_node *n, int x, int nsp, const int64_t *pb, const int64_t *pe,
                       double value);
/* MaxPool / AveragePool over a rank-3 input (onnx_ops_nn.c; core's pools call it). */
mge_status mge_onnx_pool1d(mge_onnx_ctx *c, mge_onnx_node *n, int maxp);
/* MaxPool (kind 1), AveragePool (0), LpPool (2) over rank 4 or 5 on the 3-D
 * pools (onnx_ops_pool3d.c): 3-D, dilated, asymmetric, Indices, i8/u8. */
mge_status mge_onnx_pool3d(mge_onnx_ctx *c, mge_onnx_node *n, int kind);
/* BatchNormalization training_mode = 1 (onnx_ops_bntrain.c): in[] the 5 inputs. */
mge_status mge_onnx_batchnorm_train(mge_onnx_ctx *c, mge_onnx_node *n, const int *in);
/* 3-D ConvTranspose on conv3d_grad_input (onnx_ops_convt3d.c), from nn's parsed attributes. */
mge_status mge_onnx_convtranspose3d(mge_onnx_ctx *c, mge_onnx_node *n, int x, int w, int b, int64_t M, int64_t group,
                                    const int64_t *k, const int64_t *s, const int64_t *d, const int64_t *op,
                                    const int64_t *pb, const int64_t *pe);

/* ---- the reader's (onnx_read.c) */
/* The value an ONNX name stands for (an initializer becomes one now), or -1. */
int mge_onnx_lookup(mge_onnx_ctx *c, const char *name);
/* Converts a node list (a graph's, or a folded If branch's) in order. */
mge_status mge_onnx_nodes(mge_onnx_ctx *c, size_t nn, Onnx__NodeProto *const *nodes);
mge_status mge_onnx_add_initializers(mge_onnx_ctx *c, size_t ni, Onnx__TensorProto *const *init);

#endif
