/* test_planner.c — the static memory planner: in-place reuse, views,
 * liveness and an independent overlap check on chains, diamonds, random
 * DAGs and a ResNet-18-shaped graph. */
#include "internal.h"
#include "unit.h"
#include "unit_graph.h"

static mge_error err;

/* ---------------------------------------------------------------- graph building */

static int linear(mge_graph *g, const char *name, int x, int out)
{
    mge_attr a = A(MGE_KEY_out, out);
    return layer(g, name, MGE_OP_LINEAR, x, 1, &a);
}

static int conv(mge_graph *g, const char *name, int x, int out, int k, int stride, int pad)
{
    mge_attr a[5] = {A(MGE_KEY_out, out), A(MGE_KEY_kernel, k), A(MGE_KEY_stride, stride), A(MGE_KEY_pad, pad),
                     A(MGE_KEY_bias, 0)};
    return layer(g, name, MGE_OP_CONV2D, x, 5, a);
}

static int input(mge_graph *g, const char *name, int ndim, const int64_t *dims)
{
    return mge_graph_add_value(g, name, MGE_VAL_INPUT, MGE_F32, ndim, dims, &err);
}

/* ---------------------------------------------------------------- checking */

/* Plans g for its outputs at batch; need[] is filled. */
static int plan(const mge_graph *g, int64_t batch, mge_plan *p, char *need)
{
    mge_graph_needed(g, g->noutputs, g->outputs, need, NULL);
    mge_status s = mge_plan_build(g, need, MGE_BATCH(batch), g->noutputs, g->outputs, mge_backend_cpu(), 1, NULL, p, &err);
    CHECK_OK(s, err);
    return s == MGE_OK;
}

static int view_of(const mge_graph *g, int v)
{
    const mge_value *val = &g->values[v];
    return val->kind == MGE_VAL_NODE && (mge_op_info(g->nodes[val->producer].op)->flags & MGE_OPF_ALIAS);
}

/* Recomputes liveness on its own and checks that no two values live at the
 * same step share bytes, except a view with what it views and an in-place
 * output with the input it replaced (at that one step). Also checks the
 * plan's lower bound and no-reuse figures and the arena bounds. */
static void check_plan(const mge_graph *g, const char *need, const mge_plan *p)
{
    int nv = g->nvalues, step = 0, end;
    int *def = calloc((size_t)nv, sizeof *def), *last = calloc((size_t)nv, sizeof *last);
    int *stepn = calloc((size_t)g->nnodes, sizeof *stepn);
    for (int v = 0; v < nv; v++)
        def[v] = last[v] = -1;
    for (int i = 0; i < g->nnodes; i++) {
        if (!need[i])
            continue;
        stepn[i] = step;
        for (int k = 0; k < g->nodes[i].nin; k++)
            last[g->nodes[i].in[k]] = step;
        for (int k = 0; k < g->nodes[i].nout; k++)
            def[g->nodes[i].out[k]] = step;
        step++;
    }
    end = step;
    for (int i = 0; i < g->noutputs; i++)
        last[g->outputs[i]] = end;
    /* a view keeps what it views alive: propagate its end to its source, back to front */
    for (int v = nv - 1; v >= 0; v--)
        if (def[v] >= 0 && view_of(g, v)) {
            int src = g->nodes[g->values[v].producer].in[0];
            int lv = last[v] > def[v] ? last[v] : def[v];
            if (lv > last[src])
                last[src] = lv;
        }
    for (int v = 0; v < nv; v++)
        if (def[v] >= 0 && last[v] < def[v])
            last[v] = def[v];
    int checked = 0;
    for (int u = 0; u < nv; u++) {
        if (def[u] < 0)
            continue;
        CHECK_MSG((p->offset[u] >= 0) == (p->alias[u] < 0 || g->values[p->alias[u]].kind == MGE_VAL_NODE),
                  "'%s': offset %lld alias %d", g->values[u].name, (long long)p->offset[u], p->alias[u]);
        if (p->offset[u] < 0)
            continue;
        CHECK(p->offset[u] % 64 == 0);
        CHECK_MSG((size_t)p->offset[u] + p->nbytes[u] <= p->st.arena_bytes, "'%s' beyond the arena",
                  g->values[u].name);
        for (int v = u + 1; v < nv; v++) {
            if (def[v] < 0 || p->offset[v] < 0 || !p->nbytes[u] || !p->nbytes[v])
                continue;
            int t_overlap = def[u] <= last[v] && def[v] <= last[u];
            int m_overlap = p->offset[u] < p->offset[v] + (int64_t)p->nbytes[v] &&
                            p->offset[v] < p->offset[u] + (int64_t)p->nbytes[u];
            if (!t_overlap || !m_overlap)
                continue;
            checked++;
            int ru = p->alias[u] >= 0 ? p->alias[u] : u, rv = p->alias[v] >= 0 ? p->alias[v] : v;
            int ok = 0;
            if (ru == rv && p->offset[u] == p->offset[v]) {
                const mge_node *pv = &g->nodes[g->values[v].producer];
                int in0 = pv->in[0];
                int rin0 = p->alias[in0] >= 0 ? p->alias[in0] : in0;
                if (view_of(g, v) && rin0 == ru)
                    ok = 1; /* a view over the same bytes */
                else if ((mge_op_info(pv->op)->flags & MGE_OPF_INPLACE) && rin0 == ru && last[u] == def[v])
                    ok = 1; /* in-place: u dies where v is born */
                else if (view_of(g, u) && last[u] <= def[v])
                    ok = 1; /* a view of an earlier value in the same in-place chain */
            }
            CHECK_MSG(ok, "'%s' [%d,%d] @%lld+%zu and '%s' [%d,%d] @%lld+%zu overlap", g->values[u].name, def[u],
                      last[u], (long long)p->offset[u], p->nbytes[u], g->values[v].name, def[v], last[v],
                      (long long)p->offset[v], p->nbytes[v]);
        }
    }
    (void)checked;
    /* lower bound and no-reuse, from distinct buffers (roots) */
    size_t *live = calloc((size_t)end + 1, sizeof *live), total = 0;
    int nbuf = 0;
    for (int r = 0; r < nv; r++) {
        if (def[r] < 0 || p->offset[r] < 0 || p->alias[r] >= 0)
            continue;
        int lo = def[r], hi = last[r];
        for (int v = 0; v < nv; v++)
            if (def[v] >= 0 && p->alias[v] == r && last[v] > hi)
                hi = last[v];
        size_t sz = (p->nbytes[r] + 63) & ~(size_t)63;
        total += sz;
        nbuf++;
        for (int t = lo; t <= hi && t <= end; t++)
            live[t] += sz;
    }
    size_t lb = 0;
    for (int t = 0; t <= end; t++)
        if (live[t] > lb)
            lb = live[t];
    CHECK_MSG(lb == p->st.lower_bound, "lower bound %zu, planner says %zu", lb, p->st.lower_bound);
    CHECK_MSG(total == p->st.no_reuse_bytes, "no-reuse %zu, planner says %zu", total, p->st.no_reuse_bytes);
    CHECK(nbuf == p->st.nbuffers);
    CHECK(p->st.arena_bytes >= p->st.lower_bound);
    CHECK(p->st.arena_bytes <= p->st.no_reuse_bytes);
    free(live);
    free(def);
    free(last);
    free(stepn);
}

/* ---------------------------------------------------------------- tests */

/* x -> fc1 -> relu (in place) -> fc2 -> relu (in place) -> flatten (view). */
static void test_chain(void)
{
    mge_graph *g = mge_graph_new();
    int64_t xd[2] = {MGE_DIM_N, 32};
    int x = input(g, "x", 2, xd);
    int xr = un(g, "xr", MGE_OP_RELU, x); /* input 0 is a graph input: no in-place */
    int f1 = linear(g, "fc1", xr, 64);
    int r1 = un(g, "r1", MGE_OP_RELU, f1);
    int f2 = linear(g, "fc2", r1, 64);
    int r2 = un(g, "r2", MGE_OP_RELU, f2);
    int fl = un(g, "flat", MGE_OP_FLATTEN, r2);
    int xf = un(g, "xf", MGE_OP_FLATTEN, x); /* view of an input: outside the arena */
    CHECK_OK(mge_graph_add_output(g, fl, &err), err);
    CHECK_OK(mge_graph_add_output(g, xf, &err), err);
    char need[16];
    mge_plan p;
    if (!plan(g, 4, &p, need))
        goto done;
    CHECK(p.alias[xr] < 0 && p.offset[xr] >= 0);
    CHECK(p.alias[r1] == f1 && p.offset[r1] == p.offset[f1]);
    CHECK(p.alias[r2] == f2 && p.offset[r2] == p.offset[f2]);
    CHECK(p.alias[fl] == f2 && p.offset[fl] == p.offset[f2]);
    CHECK(p.alias[xf] == x && p.offset[xf] == -1);
    CHECK(p.offset[x] == -1);
    CHECK(p.st.ninplace == 2);
    CHECK(p.st.nbuffers == 3); /* xr, fc1, fc2 */
    CHECK(p.nbytes[f1] == 4 * 64 * 4);
    CHECK(p.ndims[fl] == 2 && p.dims[fl * MGE_MAX_DIMS] == 4 && p.dims[fl * MGE_MAX_DIMS + 1] == 64);
    check_plan(g, need, &p);
    /* the peak is fc2's step: r1 (fc1's buffer) is read while fc2 is written, 1024 bytes each */
    CHECK(p.st.lower_bound == 1024 + 1024);
    CHECK(p.st.arena_bytes == p.st.lower_bound);
    mge_plan_stats st;
    CHECK_OK(mge_plan_graph(g, MGE_BATCH(4), 0, NULL, &st, &err), err);
    CHECK(st.arena_bytes == p.st.arena_bytes && st.lower_bound == p.st.lower_bound && st.ninplace == 2);
    mge_plan_free(&p);
    /* at another batch the sizes scale */
    CHECK_OK(mge_plan_graph(g, MGE_BATCH(8), 0, NULL, &st, &err), err);
    CHECK(st.lower_bound == 2 * (1024 + 1024));
done:
    mge_graph_free(g);
}

/* a used twice: b = relu(a) cannot be in place, c = add(b, a) can (b dies there). */
static void test_diamond(void)
{
    mge_graph *g = mge_graph_new();
    int64_t xd[2] = {MGE_DIM_N, 16};
    int x = input(g, "x", 2, xd);
    int a = linear(g, "a", x, 16);
    int b = un(g, "b", MGE_OP_RELU, a);
    int c = bin(g, "c", MGE_OP_ADD, b, a);
    int d = un(g, "d", MGE_OP_SIGMOID, c);
    CHECK_OK(mge_graph_add_output(g, d, &err), err);
    char need[8];
    mge_plan p;
    if (!plan(g, 3, &p, need))
        goto done;
    CHECK(p.alias[b] < 0);
    CHECK(p.offset[b] != p.offset[a]);
    CHECK(p.alias[c] == b && p.offset[c] == p.offset[b]);
    CHECK(p.alias[d] == b);
    CHECK(p.st.ninplace == 2);
    check_plan(g, need, &p);
    mge_plan_free(&p);
done:
    mge_graph_free(g);
}

/* In-place is refused when input 0 is a requested output, is still used
 * later, has another byte size (broadcasting) or lives outside the arena. */
static void test_inplace_refusals(void)
{
    mge_graph *g = mge_graph_new();
    int64_t xd[2] = {MGE_DIM_N, 8}, bd[1] = {8};
    int x = input(g, "x", 2, xd);
    int bias = mge_graph_add_value(g, "bias", MGE_VAL_PARAM, MGE_F32, 1, bd, &err);
    int a = linear(g, "a", x, 8);
    int o1 = un(g, "o1", MGE_OP_RELU, a);   /* a is a requested output */
    int s = un(g, "s", MGE_OP_NEG, o1);
    int w = bin(g, "w", MGE_OP_ADD, bias, s); /* in0 is a param, and smaller */
    int sm = linear(g, "sm", w, 4);
    int v = un(g, "v", MGE_OP_EXP, sm);     /* sm dies here: in place */
    int q = bin(g, "q", MGE_OP_MUL, v, v);  /* both inputs are v: in place */
    CHECK_OK(mge_graph_add_output(g, a, &err), err);
    CHECK_OK(mge_graph_add_output(g, q, &err), err);
    char need[16];
    mge_plan p;
    if (!plan(g, 2, &p, need))
        goto done;
    CHECK(p.alias[o1] < 0 && p.offset[o1] != p.offset[a]);
    CHECK(p.alias[s] == o1);
    CHECK(p.alias[w] < 0 && p.offset[w] >= 0);
    CHECK(p.alias[v] == sm && p.alias[q] == sm);
    CHECK(p.st.ninplace == 3);
    check_plan(g, need, &p);
    mge_plan_free(&p);
    /* requesting only q drops nothing (all needed), requesting only a needs one node */
    mge_plan_stats st;
    CHECK_OK(mge_plan_graph(g, MGE_BATCH(2), 1, &a, &st, &err), err);
    CHECK(st.nbuffers == 1 && st.ninplace == 0 && st.arena_bytes == 64);
    int bad = 9999;
    CHECK(mge_plan_graph(g, MGE_BATCH(2), 1, &bad, &st, &err) == MGE_ERR_INVALID);
done:
    mge_graph_free(g);
}

/* Random DAGs of unary/binary/linear/flatten ops: the checker must pass. */
static void test_random_dags(void)
{
    uint64_t seed = 12345;
    for (int trial = 0; trial < 60; trial++) {
        mge_rng r;
        mge_rng_seed(&r, seed + (uint64_t)trial);
        mge_graph *g = mge_graph_new();
        int64_t xd[2] = {MGE_DIM_N, 8};
        int vals[64], nvals = 0;
        vals[nvals++] = input(g, "x", 2, xd);
        int nnodes = 5 + (int)(mge_rng_next(&r) % 30);
        for (int i = 0; i < nnodes; i++) {
            char nm[32];
            snprintf(nm, sizeof nm, "n%d", i);
            int a = vals[nvals - 1 - (int)(mge_rng_next(&r) % (uint64_t)(nvals < 4 ? nvals : 4))];
            int b = vals[mge_rng_next(&r) % (uint64_t)nvals];
            int kind = (int)(mge_rng_next(&r) % 5), v;
            if (kind == 0)
                v = un(g, nm, MGE_OP_RELU, a);
            else if (kind == 1)
                v = bin(g, nm, MGE_OP_ADD, a, b);
            else if (kind == 2)
                v = linear(g, nm, a, 8);
            else if (kind == 3)
                v = un(g, nm, MGE_OP_FLATTEN, a);
            else
                v = bin(g, nm, MGE_OP_MUL, b, a);
            if (v < 0)
                break;
            vals[nvals++] = v;
            if (mge_rng_next(&r) % 6 == 0)
                mge_graph_add_output(g, v, NULL);
        }
        if (!g->noutputs || g->outputs[g->noutputs - 1] != vals[nvals - 1])
            CHECK_OK(mge_graph_add_output(g, vals[nvals - 1], &err), err);
        char need[64];
        mge_plan p;
        if (plan(g, 1 + trial % 5, &p, need)) {
            check_plan(g, need, &p);
            mge_plan_free(&p);
        }
        mge_graph_free(g);
    }
}

static int bn(mge_graph *g, const char *name, int x)
{
    return layer(g, name, MGE_OP_BATCHNORM, x, 0, NULL);
}

static int basic_block(mge_graph *g, const char *pre, int x, int out, int stride, int down)
{
    char n[64], m[64];
    snprintf(n, sizeof n, "%s.conv1", pre);
    int c1 = conv(g, n, x, out, 3, stride, 1);
    snprintf(n, sizeof n, "%s.bn1", pre);
    int b1 = bn(g, n, c1);
    snprintf(n, sizeof n, "%s.relu1", pre);
    int r1 = un(g, n, MGE_OP_RELU, b1);
    snprintf(n, sizeof n, "%s.conv2", pre);
    int c2 = conv(g, n, r1, out, 3, 1, 1);
    snprintf(n, sizeof n, "%s.bn2", pre);
    int b2 = bn(g, n, c2);
    int id = x;
    if (down) {
        snprintf(n, sizeof n, "%s.downsample.0", pre);
        snprintf(m, sizeof m, "%s.downsample.1", pre);
        id = bn(g, m, conv(g, n, x, out, 1, stride, 0));
    }
    snprintf(n, sizeof n, "%s.add", pre);
    int s = bin(g, n, MGE_OP_ADD, b2, id);
    snprintf(n, sizeof n, "%s.relu2", pre);
    return un(g, n, MGE_OP_RELU, s);
}

static mge_graph *resnet18(void)
{
    mge_graph *g = mge_graph_new();
    int64_t xd[4] = {MGE_DIM_N, 3, 224, 224};
    int x = input(g, "x", 4, xd);
    int h = un(g, "relu", MGE_OP_RELU, bn(g, "bn1", conv(g, "conv1", x, 64, 7, 2, 3)));
    mge_attr pa[3] = {A(MGE_KEY_kernel, 3), A(MGE_KEY_stride, 2), A(MGE_KEY_pad, 1)};
    h = node(g, "maxpool", MGE_OP_MAXPOOL2D, 1, &h, 3, pa);
    int widths[4] = {64, 128, 256, 512};
    for (int st = 0; st < 4; st++)
        for (int b = 0; b < 2; b++) {
            char pre[32];
            snprintf(pre, sizeof pre, "layer%d.%d", st + 1, b);
            int stride = st > 0 && b == 0 ? 2 : 1;
            h = basic_block(g, pre, h, widths[st], stride, st > 0 && b == 0);
        }
    h = un(g, "avgpool", MGE_OP_GLOBAL_AVGPOOL, h);
    h = un(g, "flatten", MGE_OP_FLATTEN, h);
    h = linear(g, "fc", h, 1000);
    if (h < 0 || mge_graph_add_output(g, h, &err)) {
        mge_graph_free(g);
        return NULL;
    }
    return g;
}

static void test_resnet18(void)
{
    mge_graph *g = resnet18();
    CHECK(g != NULL);
    if (!g)
        return;
    char *need = calloc((size_t)g->nnodes, 1);
    int64_t batches[3] = {1, 8, 32};
    for (int i = 0; i < 3; i++) {
        mge_plan p;
        if (!plan(g, batches[i], &p, need))
            break;
        printf("resnet18 batch %lld: arena %.2f MiB, lower bound %.2f MiB (%.3fx), no reuse %.2f MiB, "
               "%d buffers, %d in place, workspace %.2f MiB\n",
               (long long)batches[i], p.st.arena_bytes / 1048576.0, p.st.lower_bound / 1048576.0,
               (double)p.st.arena_bytes / (double)p.st.lower_bound, p.st.no_reuse_bytes / 1048576.0,
               p.st.nbuffers, p.st.ninplace, p.st.workspace_bytes / 1048576.0);
        CHECK((double)p.st.arena_bytes <= 1.10 * (double)p.st.lower_bound);
        CHECK(p.st.no_reuse_bytes > 3 * p.st.arena_bytes);
        CHECK(p.st.ninplace >= 17); /* every relu after a batchnorm/add */
        /* conv1's output at batch b: b*64*112*112 f32 must be live at its step */
        CHECK(p.st.lower_bound >= (size_t)batches[i] * 64 * 112 * 112 * 4);
        check_plan(g, need, &p);
        mge_plan_free(&p);
    }
    free(need);
    mge_graph_free(g);
}

/* The bundled sample nets (run from the repository root, as make check does). */
static void test_sample_nets(void)
{
    const char *paths[3] = {"samples/nets/resnet18.mgt", "samples/nets/mobilenet_v2.mgt", "samples/nets/lenet.mgt"};
    for (int i = 0; i < 3; i++) {
        mge_graph *g = NULL;
        CHECK_OK(mge_model_load(paths[i], &g, &err), err);
        if (!g)
            continue;
        char *need = calloc((size_t)g->nnodes, 1);
        for (int64_t batch = 1; batch <= 16; batch *= 16) {
            mge_plan p;
            if (!plan(g, batch, &p, need))
                break;
            printf("%s batch %lld: arena %.2f MiB, lower bound %.2f MiB (%.3fx), no reuse %.2f MiB, %d in place\n",
                   paths[i], (long long)batch, p.st.arena_bytes / 1048576.0, p.st.lower_bound / 1048576.0,
                   (double)p.st.arena_bytes / (double)p.st.lower_bound, p.st.no_reuse_bytes / 1048576.0,
                   p.st.ninplace);
            CHECK((double)p.st.arena_bytes <= 1.10 * (double)p.st.lower_bound);
            CHECK(p.st.ninplace > 0);
            check_plan(g, need, &p);
            mge_plan_free(&p);
        }
        free(need);
        mge_graph_free(g);
    }
}

/* Planning fails cleanly on shapes that do not fit at the given batch. */
static void test_errors(void)
{
    mge_graph *g = mge_graph_new();
    int64_t xd[2] = {MGE_DIM_N, 4};
    int x = input(g, "x", 2, xd);
    int a = linear(g, "a", x, 4);
    CHECK_OK(mge_graph_add_output(g, a, &err), err);
    mge_plan_stats st;
    /* 2^47 rows of 4 floats: the arena size would overflow the element limit */
    mge_status s = mge_plan_graph(g, MGE_BATCH((int64_t)1 << 47), 0, NULL, &st, &err);
    CHECK(s == MGE_ERR_SHAPE);
    CHECK_OK(mge_plan_graph(g, MGE_BATCH(0), 0, NULL, &st, &err), err);
    CHECK(st.arena_bytes == 0 && st.nbuffers == 1);
    mge_graph_free(g);
}

int main(void)
{
    RUN(test_chain);
    RUN(test_diamond);
    RUN(test_inplace_refusals);
    RUN(test_random_dags);
    RUN(test_resnet18);
    RUN(test_sample_nets);
    RUN(test_errors);
    return unit_done();
}
