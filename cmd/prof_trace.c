/* prof_trace.c — mge-prof's Chrome trace writer (see prof_trace.h). */
#include "prof_trace.h"

#include <stdlib.h>
#include <string.h>

void prof_spans_add(prof_spans *l, double t0, double t1, int node)
{
    if (l->failed)
        return;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 256;
        prof_span *ns = realloc(l->s, sizeof *ns * (size_t)cap);
        if (!ns) {
            l->failed = 1;
            return;
        }
        l->s = ns;
        l->cap = cap;
    }
    l->s[l->n].t0 = t0;
    l->s[l->n].t1 = t1;
    l->s[l->n].node = node;
    l->n++;
}

void prof_spans_free(prof_spans *l)
{
    free(l->s);
    memset(l, 0, sizeof *l);
}

void prof_json_str(mge_buf *b, const char *s)
{
    mge_buf_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            mge_buf_printf(b, "\\%c", c);
        else if (c < 0x20)
            mge_buf_printf(b, "\\u%04x", c);
        else
            mge_buf_put(b, s, 1);
    }
    mge_buf_put(b, "\"", 1);
}

static double us(const prof_trace *t, double sec)
{
    return (sec - t->base) * 1e6;
}

static void thread_name(mge_buf *b, int tid, const char *name)
{
    mge_buf_printf(b, ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, \"tid\": %d, \"args\": {\"name\": ",
                   tid);
    prof_json_str(b, name);
    mge_buf_printf(b, "}}");
}

void prof_trace_json(const prof_trace *t, mge_buf *b)
{
    const mge_graph *g = t->g;
    mge_buf_printf(b, "{\"traceEvents\": [\n");
    mge_buf_printf(b, "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, \"args\": {\"name\": ");
    prof_json_str(b, t->title);
    mge_buf_printf(b, "}}");
    thread_name(b, 0, "nodes");
    for (int i = 0; i < t->nthreads; i++) {
        char name[64];
        snprintf(name, sizeof name, i ? "pool thread %d" : "pool thread %d (caller)", i);
        thread_name(b, i + 1, name);
    }
    for (int k = 0; k < t->nodes->n; k++) {
        const prof_span *s = &t->nodes->s[k];
        const mge_node *n = &g->nodes[s->node];
        char shape[256];
        int v = n->nout > 0 ? n->out[0] : -1;
        if (v >= 0)
            mge_shape_str(g->values[v].dtype, t->ndims[v], &t->dims[(size_t)v * MGE_MAX_DIMS], shape, sizeof shape);
        else
            snprintf(shape, sizeof shape, "-");
        mge_buf_printf(b, ",\n{\"name\": ");
        prof_json_str(b, n->name);
        mge_buf_printf(b, ", \"cat\": \"node\", \"ph\": \"X\", \"ts\": %.3f, \"dur\": %.3f, \"pid\": 0, \"tid\": 0, "
                          "\"args\": {\"op\": \"%s\", \"shape\": ",
                       us(t, s->t0), (s->t1 - s->t0) * 1e6, mge_op_info(n->op)->name);
        prof_json_str(b, shape);
        mge_buf_printf(b, ", \"flops\": %.0f}}", mge_graph_node_flops(g, s->node, t->ndims, t->dims));
        mge_buf_printf(b, ",\n{\"name\": \"arena\", \"ph\": \"C\", \"ts\": %.3f, \"pid\": 0, \"args\": {\"bytes\": %zu}}",
                       us(t, s->t0), t->live ? t->live[s->node] : (size_t)0);
    }
    for (int i = 0; i < t->nthreads; i++)
        for (int k = 0; k < t->pool[i].n; k++) {
            const prof_span *s = &t->pool[i].s[k];
            mge_buf_printf(b, ",\n{\"name\": \"task\", \"cat\": \"pool\", \"ph\": \"X\", \"ts\": %.3f, \"dur\": %.3f, "
                              "\"pid\": 0, \"tid\": %d, \"args\": {\"node\": ",
                           us(t, s->t0), (s->t1 - s->t0) * 1e6, i + 1);
            prof_json_str(b, s->node >= 0 ? g->nodes[s->node].name : "?");
            mge_buf_printf(b, "}}");
        }
    mge_buf_printf(b, "\n], \"displayTimeUnit\": \"ms\"}\n");
}
