/* weights.c — --weights W.npz for the tools: read, optionally set aside
 * the entries the model has no use for, bind the rest (formats/params.c
 * checks names, dtypes and shapes, all or nothing). */
#include "weights.h"

#include <stdlib.h>
#include <string.h>

/* Names listed in the warning before "and N more". */
#define LIST_MAX 10

static int bindable(const mge_graph *g, const char *name)
{
    int v = mge_graph_find(g, name);
    if (v < 0)
        return 0;
    mge_valkind k = g->values[v].kind;
    return k == MGE_VAL_PARAM || k == MGE_VAL_STATE || k == MGE_VAL_CONST;
}

int cli_weights_bind(mge_graph *g, const char *path, int allow_missing, int allow_unused)
{
    const char *where = cli_name(path);
    if (cli_stdin_ready(path, "weights (.npz)", NULL))
        return -1;
    mge_error err;
    mge_error_clear(&err);
    mge_tlist l = {0};
    if (mge_npz_read_path(path, &l, &err)) {
        cli_mge_error(where, &err);
        return -1;
    }
    /* a view of the entries to bind: names and tensors stay l's */
    mge_tlist use = l;
    mge_buf unused = {0};
    int nunused = 0, rc = -1;
    if (allow_unused) {
        use.names = malloc(sizeof *use.names * (size_t)(l.n + 1));
        use.t = malloc(sizeof *use.t * (size_t)(l.n + 1));
        if (!use.names || !use.t) {
            cli_error(NULL, "out of memory");
            goto done;
        }
        use.n = 0;
        for (int i = 0; i < l.n; i++) {
            if (bindable(g, l.names[i])) {
                use.names[use.n] = l.names[i];
                use.t[use.n++] = l.t[i];
            } else if (nunused++ < LIST_MAX) {
                mge_buf_printf(&unused, "%s%s", nunused > 1 ? ", " : "", l.names[i]);
            }
        }
        if (nunused > LIST_MAX)
            mge_buf_printf(&unused, " and %d more", nunused - LIST_MAX);
        if (unused.failed) {
            cli_error(NULL, "out of memory");
            goto done;
        }
    }
    if (mge_params_bind(g, &use, allow_missing, &err)) {
        cli_mge_error(where, &err);
        goto done;
    }
    if (nunused)
        cli_warn(where, "%d unused entr%s (no parameter, state or constant of the model has the name): %s", nunused,
                 nunused == 1 ? "y" : "ies", unused.p);
    cli_note(where, "bound %d parameter tensors", use.n);
    rc = use.n;
done:
    if (allow_unused) {
        free(use.names);
        free(use.t);
    }
    mge_buf_free(&unused);
    mge_tlist_free(&l);
    return rc;
}
