/* mge_train.h — the training step as one graph (part of the public API; included by mge.h).
 *
 * A trainer owns a deep copy of the model extended with the gradient nodes
 * (mge_grad_build) and the optimizer updates (mge_optim_build), and two
 * executors over it: training mode (forward, backward, update) and eval mode
 * (forward only, for validation). Parameters, running statistics and
 * optimizer moments live in the trainer's copy; mge_trainer_export writes
 * them back into a model for saving. */
#ifndef MGE_TRAIN_H
#define MGE_TRAIN_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mge_trainer mge_trainer;

typedef struct mge_train_opts {
    mge_optim_opts optim;
    int threads;             /* 0 = 1 */
    const char *backend;     /* NULL = "cpu" */
    uint64_t seed;           /* training-mode randomness (dropout): reseeded from (seed, step) every step */
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
/* Classes of a cross_entropy loss (logits' last dim), or 0. */
int64_t mge_trainer_classes(const mge_trainer *t);
/* One step: forward, backward, update with learning rate lr; step is the
 * 1-based number of this update (Adam's bias correction, SGD's first step). */
mge_status mge_trainer_step(mge_trainer *t, const mge_tensor *const *batch, double lr, int64_t step,
                            mge_train_result *r, mge_error *err);
/* Forward only in eval mode (dropout off, batchnorm running statistics). */
mge_status mge_trainer_eval(mge_trainer *t, const mge_tensor *const *batch, mge_train_result *r, mge_error *err);
/* Plan figures of the training step at batch (arena against its lower bound). */
mge_status mge_trainer_stats(mge_trainer *t, int64_t batch, mge_plan_stats *st, mge_error *err);
/* The training graph (forward + backward + update), for inspection. */
const mge_graph *mge_trainer_graph(const mge_trainer *t);
/* A copy of model with the trained params and state; with_opt also adds the
 * optimizer state so that mge_trainer_create on the result resumes. */
mge_status mge_trainer_export(const mge_trainer *t, const mge_graph *model, int with_opt, mge_graph **out,
                              mge_error *err);

#ifdef __cplusplus
}
#endif
#endif
