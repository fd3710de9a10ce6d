/* run_data.c — mge-run --data: feed a dataset (IDX, npz, archives, streams)
 * through the model in batches, in order, without shuffling. */
#include "run_data.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void run_data_classifier(const mge_graph *g, int *logits, int *labels)
{
    *logits = *labels = -1;
    for (int i = 0; i < g->nnodes; i++)
        if (g->loss >= 0 && g->nodes[i].out[0] == g->loss && g->nodes[i].op == MGE_OP_CROSS_ENTROPY) {
            *logits = g->nodes[i].in[0];
            *labels = g->nodes[i].in[1];
        }
}

int run_data(const char *spec, int64_t batch, const mge_data_opts *dopts, mge_graph *g, mge_exec *e, cli_out *out,
             const char *out_name, int labels, int logits_k)
{
    mge_error err;
    mge_error_clear(&err);
    int nin = mge_exec_ninputs(e), nb = 0, rc = -1;
    int *bind = malloc(sizeof(int) * (size_t)(nin + 1));
    const mge_tensor **argv = calloc((size_t)(nin + 1), sizeof *argv);
    mge_dataset ds = {0};
    mge_loader *l = NULL;
    int64_t correct = 0, seen = 0;
    if (!bind || !argv) {
        cli_error(NULL, "out of memory");
        goto done;
    }
    for (int i = 0; i < nin; i++)
        bind[nb++] = mge_exec_input(e, i);
    int lab_k = -1;
    if (labels >= 0) {
        for (int i = 0; i < nb; i++)
            if (bind[i] == labels)
                lab_k = i;
        if (lab_k < 0) {
            lab_k = nb;
            bind[nb++] = labels;
        }
    }
    if (cli_stdin_ready(spec, "data", NULL))
        goto done;
    if (mge_dataset_load(spec, &ds, &err) || mge_dataset_bind(&ds, g, nb, bind, dopts, &err)) {
        cli_mge_error(cli_name(spec), &err);
        goto done;
    }
    if (ds.count <= 0) {
        cli_error(cli_name(spec), "empty dataset");
        goto done;
    }
    if (mge_loader_create(&ds, batch, 0, 0, 0, 1, &l, &err) || mge_loader_start(l, 0, 0, &err)) {
        cli_mge_error(cli_name(spec), &err);
        goto done;
    }
    int64_t step = 0;
    for (;; step++) {
        const mge_tensor *const *b;
        mge_status s = mge_loader_next(l, &b, &err);
        if (s == MGE_ERR_EOF)
            break;
        if (s) {
            cli_mge_error(cli_name(spec), &err);
            goto done;
        }
        for (int i = 0; i < nin; i++)
            argv[i] = b[i];
        if (mge_exec_run(e, argv, &err)) {
            cli_error(cli_name(spec), "batch %lld: %s", (long long)step, err.msg);
            goto done;
        }
        for (int k = 0; out->f && k < mge_exec_noutputs(e); k++)
            if (mge_npy_write(out->f, mge_exec_result(e, k), &err)) {
                cli_mge_error(out_name, &err);
                goto done;
            }
        if (lab_k >= 0) {
            const mge_tensor *lg = mge_exec_result(e, logits_k);
            int64_t ok = mge_count_correct(lg, b[lab_k]);
            if (ok < 0) {
                cli_error(cli_name(spec), "--accuracy needs f32 logits [N,C] and labels [N]");
                goto done;
            }
            correct += ok;
            seen += lg->dims[0];
        }
    }
    if (lab_k >= 0)
        printf("accuracy %.4f (%lld of %lld)\n", seen ? (double)correct / (double)seen : 0.0, (long long)correct,
               (long long)seen);
    if (cli_stdout_flush())
        goto done;
    rc = 0;
done:
    mge_loader_free(l);
    mge_dataset_free(&ds);
    free(bind);
    free(argv);
    return rc;
}
