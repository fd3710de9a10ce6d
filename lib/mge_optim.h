/* mge_optim.h — optimizers and learning-rate schedules (part of the public
 * API; included at the end of mge.h).
 *
 * The optimizer is part of the training graph: mge_optim_build appends, after
 * the forward and gradient nodes, one update node per parameter (sgd or adam,
 * lib/ops.def) that changes the parameter and its optimizer state in place,
 * and optionally the nodes of gradient clipping by global L2 norm. The state
 * values carry ".__opt." in their names, so a .mge written with no_state drops
 * them and one written without keeps them, and training resumes exactly.
 * Update rules are PyTorch's (torch.optim.SGD, Adam, AdamW; clip_grad_norm_). */
#ifndef MGE_OPTIM_H
#define MGE_OPTIM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

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

#ifdef __cplusplus
}
#endif
#endif
