/* run_data.c — mge-run --data: feed a dataset (IDX, npz, archives, streams,
 * CSV) through the model in batches, in order, without shuffling, and
 * find the labels --metrics scores against: an optimized model (-O2
 * strips the loss) has no labels input, so they come from the data. */
#include "run_data.h"

#include "csv.h"
#include "image.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void run_data_classifier(const mge_graph *g, int *logits, int *labels)
{
    *logits = *labels = -1;
    for (int i = 0; i < g->nnodes; i++)
        if (g->loss >= 0 && g->nodes[i].out[0] == g->loss && g->nodes[i].op == MGE_OP_CROSS_ENTROPY) {
            *logits = g->nodes[i].in[0];
            *labels = g->nodes[i].in[1];
        }
}

static int ends_with_ci(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcasecmp(s + a - b, suf) == 0;
}

int run_data_is_csv(const char *spec)
{
    return ends_with_ci(spec, ".csv") || ends_with_ci(spec, ".csv.gz");
}

static const char *const default_labels[] = {"label", "labels", "target", "targets", "y"};

/* The array of a named dataset holding the labels, or -1. */
static int named_labels(const mge_dataset *ds, const run_data_opts *o, const mge_graph *g)
{
    const char *want = o->target ? o->target : o->loss_labels >= 0 ? g->values[o->loss_labels].name : NULL;
    for (int i = 0; want && i < ds->n; i++)
        if (ds->names[i] && strcmp(ds->names[i], want) == 0)
            return i;
    if (o->target)
        return -1;
    for (size_t d = 0; d < sizeof default_labels / sizeof *default_labels; d++)
        for (int i = 0; i < ds->n; i++)
            if (ds->names[i] && strcasecmp(ds->names[i], default_labels[d]) == 0)
                return i;
    return -1;
}

/* The CSV column of the labels, or -1 (none asked for or found); -2 after printing an error. */
static int csv_labels(const mge_csv *t, const run_data_opts *o, const mge_graph *g, const char *where)
{
    mge_error err;
    if (o->target) {
        int c = mge_csv_column(t, o->target);
        if (c < 0) {
            mge_csv_no_column(t, o->target, &err);
            cli_error(where, "--target: %s", err.msg);
            return -2;
        }
        return c;
    }
    for (int k = 0; t->names && k < t->ncols; k++)
        if (o->loss_labels >= 0 && strcmp(t->names[k], g->values[o->loss_labels].name) == 0)
            return k;
    for (size_t d = 0; d < sizeof default_labels / sizeof *default_labels; d++)
        for (int k = 0; t->names && k < t->ncols; k++)
            if (strcasecmp(t->names[k], default_labels[d]) == 0)
                return k;
    return -1;
}

/* A CSV as a positional dataset: the features, then the labels column. */
static int load_csv(const run_data_opts *o, const mge_graph *g, int nin, mge_dataset *ds, int *has_labels,
                    char *lname, size_t lsize, mge_buf *feat)
{
    const char *where = cli_name(o->spec);
    mge_error err;
    mge_error_clear(&err);
    mge_csv t = {0};
    int *cols = NULL, ncols = 0, rc = -1;
    if (mge_csv_read_path(o->spec, o->header, &t, &err)) {
        cli_mge_error(where, &err);
        return -1;
    }
    int lab = csv_labels(&t, o, g, where);
    if (lab == -2)
        goto done;
    if (!(cols = malloc(sizeof *cols * (size_t)t.ncols))) {
        cli_error(NULL, "out of memory");
        goto done;
    }
    if (o->columns) {
        if (mge_csv_columns(&t, o->columns, cols, &ncols, &err)) {
            cli_error(where, "--columns: %s", err.msg);
            goto done;
        }
        for (int k = 0; k < ncols; k++)
            if (cols[k] == lab) {
                cli_error(where, "--columns: column %d ('%s') holds the labels (see --target)", lab + 1,
                          t.names ? t.names[lab] : "");
                goto done;
            }
    } else {
        for (int k = 0; k < t.ncols; k++)
            if (k != lab)
                cols[ncols++] = k;
        if (ncols == 0) {
            cli_error(where, "no feature columns: the only column holds the labels");
            goto done;
        }
    }
    if (nin != 1) {
        cli_error(where, "a CSV file feeds one input, and the model needs %d", nin);
        goto done;
    }
    /* for a shape error: what the features are */
    mge_buf_printf(feat, "the features are %d column%s (", ncols, ncols == 1 ? "" : "s");
    for (int k = 0; k < ncols && k < 8; k++) {
        if (t.names)
            mge_buf_printf(feat, "%s'%s'", k ? ", " : "", t.names[cols[k]]);
        else
            mge_buf_printf(feat, "%s%d", k ? ", " : "", cols[k] + 1);
    }
    mge_buf_printf(feat, "%s); --columns chooses them", ncols > 8 ? ", ..." : "");
    mge_buf_put(feat, "", 1);
    if (mge_csv_dataset(&t, cols, ncols, o->want_labels ? lab : -1, where, ds, &err)) {
        cli_mge_error(where, &err);
        goto done;
    }
    *has_labels = o->want_labels && lab >= 0;
    if (lab >= 0 && t.names)
        snprintf(lname, lsize, "column '%.200s'", t.names[lab]);
    else if (lab >= 0)
        snprintf(lname, lsize, "column %d", lab + 1);
    rc = 0;
done:
    free(cols);
    mge_csv_free(&t);
    return rc;
}

/* A graph holding copies of the executor's inputs and, when labels >= 0, a
 * value shaped like that dataset array: mge_dataset_bind then converts and
 * batches the labels with the inputs, although the model has no input for
 * them. *lab_k gets the labels' position among the bound arrays. */
static mge_graph *bind_graph(const mge_graph *g, mge_exec *e, const mge_dataset *ds, int labels, const char *lname,
                             int *lab_k, mge_error *err)
{
    mge_graph *bg = mge_graph_new();
    if (!bg) {
        mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        return NULL;
    }
    int nin = mge_exec_ninputs(e);
    *lab_k = -1;
    for (int i = 0; i < nin; i++) {
        const mge_value *v = &g->values[mge_exec_input(e, i)];
        if (mge_graph_add_value(bg, v->name, MGE_VAL_INPUT, v->dtype, v->ndim, v->dims, err) < 0) {
            mge_graph_free(bg);
            return NULL;
        }
        if (labels >= 0 && lname && strcmp(v->name, lname) == 0)
            *lab_k = i;   /* the model reads the labels itself (--output loss) */
    }
    if (labels >= 0 && *lab_k < 0) {
        const mge_tensor *t = &ds->t[labels];
        int64_t dims[MGE_MAX_DIMS];
        memcpy(dims, t->dims, sizeof dims);
        dims[0] = MGE_DIM_N;
        char name[64] = "labels";
        while (mge_graph_find(bg, name) >= 0)
            strcat(name, "_");
        if (mge_graph_add_value(bg, lname ? lname : name, MGE_VAL_INPUT,
                                mge_dtype_is_float(t->dtype) ? MGE_F32 : MGE_I64, t->ndim, dims, err) < 0) {
            mge_graph_free(bg);
            return NULL;
        }
        *lab_k = nin;
    }
    return bg;
}

int run_data(const run_data_opts *o, mge_graph *g, mge_exec *e, run_sink *sink)
{
    const char *where = cli_name(o->spec);
    mge_error err;
    mge_error_clear(&err);
    int nin = mge_exec_ninputs(e), rc = -1, nb = 0;
    const mge_tensor **argv = calloc((size_t)(nin + 1), sizeof *argv);
    int *bind = malloc(sizeof(int) * (size_t)(nin + 2));
    mge_dataset ds = {0};
    mge_loader *l = NULL;
    mge_graph *bg = NULL;
    mge_buf feat = {0};
    char lname_buf[300] = "";
    const char *lname = NULL;
    if (!bind || !argv) {
        cli_error(NULL, "out of memory");
        goto done;
    }
    int csv = run_data_is_csv(o->spec), has_labels = 0;
    if (csv) {
        if (load_csv(o, g, nin, &ds, &has_labels, lname_buf, sizeof lname_buf, &feat))
            goto done;
    } else {
        if (o->columns) {
            cli_error(where, "--columns selects the columns of a CSV file (a name ending in .csv)");
            goto done;
        }
        if (cli_stdin_ready(o->spec, "data", NULL))
            goto done;
        if (mge_dataset_load(o->spec, &ds, &err)) {
            cli_mge_error(where, &err);
            goto done;
        }
    }
    /* where the labels are: their array index in ds, or -1 */
    int labels = -1, reuse_k = -1;
    for (int i = 0; i < nin; i++)
        if (o->loss_labels >= 0 && mge_exec_input(e, i) == o->loss_labels)
            reuse_k = i;   /* positional data feeds the loss's labels to the model itself (--output loss) */
    if (o->want_labels && csv) {
        labels = has_labels ? 1 : -1;
        if (labels < 0) {
            cli_error(where, "--metrics: no labels column: name it with --target (a header name or a column "
                      "number)");
            goto done;
        }
    } else if (o->want_labels && !ds.positional) {
        labels = named_labels(&ds, o, g);
        if (labels < 0) {
            mge_buf b = {0};
            for (int i = 0; i < ds.n; i++)
                mge_buf_printf(&b, "%s'%s'", i ? ", " : "", ds.names[i] ? ds.names[i] : "?");
            mge_buf_put(&b, "", 1);
            if (o->target)
                cli_error(where, "--target: no array '%s' (the arrays: %s)", o->target, b.p ? b.p : "");
            else
                cli_error(where, "--metrics: no labels: no array called label, labels, target, targets or y; name "
                          "it with --target (the arrays: %s)", b.p ? b.p : "");
            mge_buf_free(&b);
            goto done;
        }
        lname = ds.names[labels];
        snprintf(lname_buf, sizeof lname_buf, "'%.200s'", lname);
    } else if (o->want_labels && reuse_k >= 0 && !o->target) {
        snprintf(lname_buf, sizeof lname_buf, "input '%s'", g->values[o->loss_labels].name);
    } else if (o->want_labels) {
        if (o->target) {
            cli_error(where, "--target names an array of a .npz or archive, or a CSV column; this dataset's arrays "
                      "have no names (the labels are the array after the inputs)");
            goto done;
        }
        labels = nin;
        if (!ds.stream && ds.n <= nin) {
            cli_error(where, "--metrics: no labels: %d array%s for the model's %d input%s", ds.n, ds.n == 1 ? "" : "s",
                      nin, nin == 1 ? "" : "s");
            goto done;
        }
        if (ds.stream && ds.n <= nin) {
            cli_error(where, "--metrics: no labels: the stream has %d record%s for the model's %d input%s, and "
                      "labels need one more per batch", ds.n, ds.n == 1 ? "" : "s", nin, nin == 1 ? "" : "s");
            goto done;
        }
        snprintf(lname_buf, sizeof lname_buf, "%s %d of %s", ds.stream ? "record" : "array", nin, where);
    }
    int lab_k = -1;
    if (!(bg = bind_graph(g, e, &ds, labels, lname, &lab_k, &err))) {
        cli_mge_error(where, &err);
        goto done;
    }
    if (lab_k < 0 && labels < 0 && o->want_labels)
        lab_k = reuse_k;
    nb = nin + (lab_k == nin);
    for (int i = 0; i < nb; i++)
        bind[i] = i;
    if (mge_dataset_bind(&ds, bg, nb, bind, o->dopts, &err)) {
        if (csv && feat.p && !feat.failed)
            snprintf(err.msg + strlen(err.msg), sizeof err.msg - strlen(err.msg), "; %s", feat.p);
        cli_mge_error(where, &err);
        goto done;
    }
    if (mge_loader_create(&ds, o->batch, 0, 0, 0, 1, &l, &err) || mge_loader_start(l, 0, 0, &err)) {
        cli_mge_error(where, &err);
        goto done;
    }
    for (int64_t step = 0;; step++) {
        const mge_tensor *const *b;
        mge_status s = mge_loader_next(l, &b, &err);
        if (s == MGE_ERR_EOF)
            break;
        if (s) {
            cli_mge_error(where, &err);
            goto done;
        }
        for (int i = 0; i < nin; i++)
            argv[i] = b[i];
        if (mge_exec_run(e, argv, &err)) {
            cli_error(where, "batch %lld: %s", (long long)step, err.msg);
            goto done;
        }
        if (run_sink_step(sink, g, e, lab_k >= 0 ? b[lab_k] : NULL, lname_buf, NULL))
            goto done;
    }
    rc = 0;
done:
    mge_loader_free(l);
    mge_dataset_free(&ds);
    mge_graph_free(bg);
    mge_buf_free(&feat);
    free(bind);
    free(argv);
    return rc;
}

const char *run_data_hint(const unsigned char *head, size_t n, const char *path)
{
    const char *kind = n ? mge_image_kind(head, n) : NULL;
    if (kind || (path && (ends_with_ci(path, ".png") || ends_with_ci(path, ".jpg") || ends_with_ci(path, ".jpeg"))))
        return "it is an image, not NPY records: give images with --image FILE";
    if ((n >= 4 && memcmp(head, "PK\003\004", 4) == 0) || (path && ends_with_ci(path, ".npz")))
        return "it is a zip (.npz) archive, not NPY records: give datasets with --data FILE (the arrays named "
               "after the inputs)";
    if (n >= 2 && head[0] == 0x1f && head[1] == 0x8b)
        return "it is gzip-compressed: give datasets (IDX .gz, .tar.gz, .npy.gz) with --data FILE, or gunzip NPY "
               "records first";
    if (n >= 4 && head[0] == 0 && head[1] == 0 && head[2] >= 0x08 && head[2] <= 0x0e)
        return "it is an IDX file, not NPY records: give it with --data FILE";
    if ((n >= 262 && memcmp(head + 257, "ustar", 5) == 0) || (path && (ends_with_ci(path, ".tar") ||
                                                                     ends_with_ci(path, ".zip"))))
        return "it is an archive, not NPY records: give datasets with --data FILE";
    if (path && run_data_is_csv(path))
        return "it is a CSV file, not NPY records: give tables with --data FILE.csv";
    return NULL;
}
