/* dump_place.c — mge-dump --device: where each node of the model would run
 * on a device, the copies between host and device, and each device's
 * share of the memory plan. */
#include "dump_place.h"

#include <stdio.h>
#include <string.h>

#include "cli.h"

int dump_placement(const mge_graph *g, const char *device, const mge_binding *bind, int threads, int json, mge_buf *b,
                   const char *where)
{
    mge_error err;
    mge_error_clear(&err);
    mge_exec_opts eo = {0};
    eo.threads = threads;
    eo.device = device;
    int one = g->loss;
    if (!g->noutputs && g->loss >= 0) {
        eo.noutputs = 1;
        eo.outputs = &one;
    }
    mge_exec *e = NULL;
    int rc = -1;
    int *ndims = NULL;
    int64_t *dims = NULL;
    if (mge_exec_create(g, &eo, &e, &err)) {
        cli_mge_error(where, &err);
        return -1;
    }
    const mge_graph *pg = mge_exec_graph(e);
    ndims = calloc((size_t)pg->nvalues + 1, sizeof *ndims);
    dims = calloc(((size_t)pg->nvalues + 1) * MGE_MAX_DIMS, sizeof *dims);
    if (!ndims || !dims) {
        cli_error(NULL, "out of memory");
        goto out;
    }
    size_t arena = 0, lower = 0;
    mge_plan_stats st;
    if (mge_graph_shapes(pg, bind, ndims, dims, &err) || mge_exec_stats(e, bind, &st, &err) ||
        mge_exec_device_stats(e, NULL, &arena, &lower, NULL, &err)) {
        cli_mge_error(where, &err);
        goto out;
    }
    int ondev = 0, onhost = 0, up = 0, down = 0;
    double bup = 0, bdown = 0, persistent = 0;
    const char *dev = mge_exec_device(e);
    for (int i = 0; i < pg->nnodes; i++) {
        const mge_node *n = &pg->nodes[i];
        if (n->op == MGE_OP_COPY) {
            double nb = cli_value_bytes(pg, ndims, dims, n->out[0]);
            if (mge_node_int(n, MGE_KEY_to, 0)) {
                up++;
                bup += nb;
            } else {
                down++;
                bdown += nb;
            }
        } else if (strcmp(mge_exec_node_device(e, i), "cpu") == 0) {
            onhost++;
        } else {
            ondev++;
        }
    }
    for (int v = 0; v < pg->nvalues; v++) {
        const mge_value *val = &pg->values[v];
        if (val->kind != MGE_VAL_NODE && val->kind != MGE_VAL_INPUT && mge_exec_value_on_device(e, v))
            persistent += cli_value_bytes(pg, ndims, dims, v);
    }
    char h1[32], h2[32], h3[32];
    if (json) {
        mge_buf_printf(b, ",\"placement\":{\"device\":");
        cli_json_str(b, dev);
        mge_buf_printf(b, ",\"nodes\":[");
        for (int i = 0; i < pg->nnodes; i++) {
            const mge_node *n = &pg->nodes[i];
            mge_buf_printf(b, "%s{\"name\":", i ? "," : "");
            cli_json_str(b, n->name);
            mge_buf_printf(b, ",\"op\":");
            cli_json_str(b, mge_op_info(n->op)->name);
            mge_buf_printf(b, ",\"device\":");
            cli_json_str(b, mge_exec_node_device(e, i));
            if (n->op == MGE_OP_COPY)
                mge_buf_printf(b, ",\"to\":\"%s\",\"bytes\":%.0f", mge_node_int(n, MGE_KEY_to, 0) ? "device" : "host",
                               cli_value_bytes(pg, ndims, dims, n->out[0]));
            mge_buf_put(b, "}", 1);
        }
        mge_buf_printf(b,
                       "],\"on_device\":%d,\"on_host\":%d,\"copies_up\":%d,\"copies_down\":%d,\"bytes_up\":%.0f,"
                       "\"bytes_down\":%.0f,\"persistent_bytes\":%.0f,\"device_arena_bytes\":%zu,"
                       "\"device_lower_bound\":%zu,\"host_arena_bytes\":%zu}",
                       ondev, onhost, up, down, bup, bdown, persistent, arena, lower, st.arena_bytes - arena);
    } else {
        char bs[256];
        mge_buf_printf(b, "#\n# placement on %s (%s), %s: %d nodes there, %d on the host\n", dev,
                       mge_exec_device_info(e), mge_binding_str(bind, bs, sizeof bs), ondev, onhost);
        for (int i = 0; i < pg->nnodes; i++) {
            const mge_node *n = &pg->nodes[i];
            if (n->op == MGE_OP_COPY)
                mge_buf_printf(b, "#   %-5s %s (%s)\n", mge_node_int(n, MGE_KEY_to, 0) ? "up" : "down", n->name,
                               cli_human_bytes(cli_value_bytes(pg, ndims, dims, n->out[0]), h1, sizeof h1));
            else
                mge_buf_printf(b, "#   %-5s %s %s\n", mge_exec_node_device(e, i), n->name, mge_op_info(n->op)->name);
        }
        mge_buf_printf(b, "# copies per run: %d up (%s), %d down (%s); uploaded once: %s of params, state and consts\n",
                       up, cli_human_bytes(bup, h1, sizeof h1), down, cli_human_bytes(bdown, h2, sizeof h2),
                       cli_human_bytes(persistent, h3, sizeof h3));
        mge_buf_printf(b, "# arenas: %s %zu bytes (lower bound %zu), cpu %zu bytes\n", dev, arena, lower,
                       st.arena_bytes - arena);
    }
    rc = 0;
out:
    free(ndims);
    free(dims);
    mge_exec_free(e);
    return rc;
}
