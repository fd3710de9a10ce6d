/* onnx_write.h — what the ONNX writer's files share: onnx_write.c
 * (the model: inputs, initializers, outputs, packing) and onnx_write_ops.c
 * (one mge node -> ONNX nodes; onnx_write_quant.c the ONNX quantization
 * ops). Private to the writer. */
#ifndef MGE_ONNX_WRITE_H
#define MGE_ONNX_WRITE_H

#include "onnx.h"

#define MGE_ONNX_WRITE_OPSET 17
#define MGE_ONNX_WRITE_IR 8

typedef struct mge_onnx_w {
    const mge_graph *g;      /* the prepared graph: unfused, training stripped */
    mge_error *err;
    void *arena;             /* every message and string below lives here */
    int nomem;
    Onnx__NodeProto **nodes;
    size_t nnodes, capnodes;
    Onnx__TensorProto **inits;
    size_t ninits, capinits;
    int fresh;               /* counter for the names of helper values */
    int nunsupported;
    mge_buf unsupported;     /* "node 'NAME' (op): reason; ..." */
    const char **names;      /* the ONNX name of each value (its mge name, or the ONNX
                                name the importer kept in onnx.name.*) */
    const mge_node *cur;     /* the node being exported (names its helpers) */
    int ncur;                /* ONNX nodes emitted for it so far */
    const char *ovin[64];    /* when set: the ONNX names standing for the node's inputs */
    const char *ovout[4];    /* ... and outputs (a float op around int8 values) */
    int float_ov;            /* the op runs on the float values: its constants are f32 */
} mge_onnx_w;

/* Arena memory (zeroed) and strings; NULL only after w->nomem is set. */
void *mge_onnx_w_alloc(mge_onnx_w *w, size_t n);
char *mge_onnx_w_strdup(mge_onnx_w *w, const char *s);
/* A fresh value name "<node>/<what><k>" no graph value has. */
const char *mge_onnx_w_tmp(mge_onnx_w *w, const char *what);
/* The ONNX name of mge value v. */
const char *mge_onnx_w_name(mge_onnx_w *w, int v);

/* Appends a node (op_type, nin input names, "" for an absent optional
 * one, nout output names); named after the mge node being exported. */
Onnx__NodeProto *mge_onnx_w_node(mge_onnx_w *w, const char *op_type, int nin, const char *const *in, int nout,
                                 const char *const *out);
/* The same with one output under a fresh name, returned. */
const char *mge_onnx_w_tmpnode(mge_onnx_w *w, const char *op_type, int nin, const char *const *in);
void mge_onnx_w_attr_i(mge_onnx_w *w, Onnx__NodeProto *n, const char *name, int64_t v);
void mge_onnx_w_attr_f(mge_onnx_w *w, Onnx__NodeProto *n, const char *name, double v);
void mge_onnx_w_attr_ints(mge_onnx_w *w, Onnx__NodeProto *n, const char *name, int cnt, const int64_t *v);
void mge_onnx_w_attr_s(mge_onnx_w *w, Onnx__NodeProto *n, const char *name, const char *s);
void mge_onnx_w_attr_strs(mge_onnx_w *w, Onnx__NodeProto *n, const char *name, int cnt, const char *const *s);
/* A TENSOR attribute holding one element (ConstantOfShape's value). */
void mge_onnx_w_attr_scalar(mge_onnx_w *w, Onnx__NodeProto *n, const char *name, int onnx_type, double v);

/* Initializers under fresh names: a 1-D int64 vector, a scalar (0-D) or
 * 1-D vector of an mge dtype (f32, f16, bf16, i8, u8, i32, i64, bool). */
const char *mge_onnx_w_i64s(mge_onnx_w *w, int cnt, const int64_t *v);
const char *mge_onnx_w_scalar(mge_onnx_w *w, mge_dtype dt, double v);
const char *mge_onnx_w_vec(mge_onnx_w *w, mge_dtype dt, int cnt, const double *v, int as_1d);
/* An n-D initializer of dtype dt with elements v[0..cnt) under a fresh name. */
const char *mge_onnx_w_const(mge_onnx_w *w, mge_dtype dt, int ndim, const int64_t *dims, int64_t cnt,
                             const double *v);
/* The initializer named name holding t's bytes (borrowed: t must outlive
 * the packing). */
mge_status mge_onnx_w_tensor(mge_onnx_w *w, const char *name, const mge_tensor *t);

/* Records the current node as unsupported; returns MGE_ERR_UNSUPPORTED. */
mge_status mge_onnx_w_unsupported(mge_onnx_w *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* onnx_write_ops.c: whether the ONNX form of node n reads its input k as
 * it is (0: the exporter writes a converted copy, lstm's and gru's weights
 * in ONNX's gate order, and the original is no initializer). */
int mge_onnx_w_reads_input(const mge_onnx_w *w, const mge_node *n, int k);
/* onnx_write_ops.c: emits node n of w->g (MGE_ERR_UNSUPPORTED after
 * mge_onnx_w_unsupported; other errors set w->err). */
mge_status mge_onnx_w_export_node(mge_onnx_w *w, const mge_node *n);
/* onnx_write_quant.c: quantize_linear, dequantize_linear, requantize,
 * matmul_integer and conv_integer. */
mge_status mge_onnx_w_export_qlin(mge_onnx_w *w, const mge_node *n);
/* onnx_write_extra_math.c: the extra math ops (acos ... dft); *done = 0
 * when n is none of them. */
mge_status mge_onnx_w_export_extra_math(mge_onnx_w *w, const mge_node *n, int *done);
/* maxpool3d, avgpool3d, max_unpool and conv3d_grad_input (as ConvTranspose): onnx_write_pool3d.c. */
mge_status mge_onnx_w_pool3d(mge_onnx_w *w, const mge_node *n);

#endif
