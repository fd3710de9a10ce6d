/* embed.c — libmge in a program of its own: load a model, run it on the
 * NPY records of a file (one per model input, in input order), print each
 * output's shape and values. The whole of mge(3) in one page.
 *
 *   cc embed.c $(pkg-config --cflags --libs mge) -o embed
 *   ./embed lenet.mge x.npy
 *
 * Every library call returns an mge_status and fills an mge_error: the
 * library never prints or exits, so the messages below are the program's. */
#include <mge.h>

#include <stdio.h>
#include <stdlib.h>

static int fail(const char *where, const mge_error *err)
{
    fprintf(stderr, "embed: %s: %s\n", where, err->msg);
    return 1;
}

/* The values of an f32 output, or a note for other dtypes. */
static void print_tensor(const char *name, const mge_tensor *t)
{
    char shape[128];
    printf("%s %s", name, mge_shape_str(t->dtype, t->ndim, t->dims, shape, sizeof shape));
    if (t->dtype != MGE_F32) {
        printf(" (not f32: values not shown)\n");
        return;
    }
    const float *v = t->data;
    int64_t n = mge_tensor_numel(t);
    printf(" =");
    for (int64_t i = 0; i < n; i++)
        printf(" %.6g", v[i]);
    printf("\n");
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: embed MODEL INPUT.npy\n");
        return 2;
    }
    mge_error err;
    mge_error_clear(&err);

    /* a .mge or a text model, recognised by content */
    mge_graph *g = NULL;
    if (mge_model_load(argv[1], &g, &err))
        return fail(argv[1], &err);
    /* a text model's parameters get their init= values (seed 0), as mge-run does */
    if (mge_graph_init_params(g, 0, &err)) {
        mge_graph_free(g);
        return fail(argv[1], &err);
    }

    /* inference on one thread; the executor plans memory once per batch size */
    mge_exec_opts o = {0};
    o.threads = 1;
    mge_exec *e = NULL;
    if (mge_exec_create(g, &o, &e, &err)) {
        mge_graph_free(g);
        return fail(argv[1], &err);
    }

    int nin = mge_exec_ninputs(e), rc = 1;
    mge_tensor *in = calloc((size_t)nin + 1, sizeof *in);
    const mge_tensor **ptr = calloc((size_t)nin + 1, sizeof *ptr);
    FILE *f = fopen(argv[2], "rb");
    if (!in || !ptr || !f) {
        fprintf(stderr, "embed: %s: cannot open\n", argv[2]);
        goto done;
    }
    /* one NPY record per input the outputs need */
    for (int i = 0; i < nin; i++) {
        if (mge_npy_read(f, &in[i], &err)) {
            fprintf(stderr, "embed: %s: input '%s': %s\n", argv[2], g->values[mge_exec_input(e, i)].name, err.msg);
            goto done;
        }
        ptr[i] = &in[i];
    }
    if (mge_exec_run(e, ptr, &err)) {
        fail(argv[1], &err);
        goto done;
    }
    /* results belong to the executor until its next run */
    for (int i = 0; i < mge_exec_noutputs(e); i++)
        print_tensor(g->values[mge_exec_output(e, i)].name, mge_exec_result(e, i));
    rc = 0;
done:
    if (f)
        fclose(f);
    for (int i = 0; in && i < nin; i++)
        mge_tensor_free(&in[i]);
    free(in);
    free(ptr);
    mge_exec_free(e);
    mge_graph_free(g);
    return rc;
}
