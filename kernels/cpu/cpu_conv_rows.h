/* cpu_conv_rows.h — stride-1 convolutions as GEMMs over shifted rows of
 * the padded image (cpu_conv_rows.c), for cpu_gemm.c and cpu_grad_conv.c. */
#ifndef MGE_CPU_CONV_ROWS_H
#define MGE_CPU_CONV_ROWS_H

#include "cpu.h"
#include "cpu_act.h"

/* cpu_rows_ok: the shape suits it (by shape and
 * ISA alone, never the thread count). Scratch sizes are in floats, per
 * thread unless they take `threads`. */
int cpu_rows_ok(const cpu_conv *c);
int64_t cpu_rows_fwd_floats(const cpu_conv *c);
void cpu_rows_conv(const mge_kctx *ctx, const cpu_conv *c, const float *x, const float *w, const float *b, float *y,
                   const cpu_epi *epi, float *ws);
/* grad input as the forward conv t of dy (cpu_rows_gi_geom fills t; 0:
 * not this way) */
int cpu_rows_gi_geom(const cpu_conv *c, cpu_conv *t);
int64_t cpu_rows_gi_floats(const cpu_conv *t, int threads);
void cpu_rows_grad_input(const mge_kctx *ctx, const cpu_conv *c, const cpu_conv *t, const float *dy, const float *w,
                         float *dx, float *ws);
/* dW_g rows [0, Og) x columns [k0, k1) into dst (leading dimension K) from
 * images [i0, i1) of group g */
int64_t cpu_rows_gw_floats(const cpu_conv *c);
void cpu_rows_grad_weight(const cpu_conv *c, const float *x, const float *dy, int64_t g, int64_t i0, int64_t i1,
                          int64_t k0, int64_t k1, float *dst, float *ws);

#endif
