/* test_dist.c — data-parallel training in lib (train.c, dist.c, the
 * allreduce and sync_batchnorm kernels) without MPI: R ranks are R threads
 * of this process sharing an in-memory communicator (mge_comm), and R
 * trainers on their rows of each global batch must give the weights of one
 * trainer on the whole batch, and the same bits on every rank. */
#include <pthread.h>

#include "internal.h"
#include "unit.h"

static mge_error err;

/* ---------------------------------------------------------------- an in-process communicator
 * Every collective: each rank posts its buffer, the ranks wait for each
 * other, each sums the posted buffers in rank order (so every rank gets
 * the same bits), waits again, then writes its own buffer. iallreduce does
 * all that at once (the ranks start buckets in the same order). */
#define MAXR 4
typedef struct shared {
    int size;
    pthread_barrier_t bar;
    void *slot[MAXR];
} shared;

typedef struct rank_comm {
    mge_comm c;
    shared *sh;
} rank_comm;

static void sum_posted(shared *sh, int rank, void *buf, int64_t n, int dbl)
{
    sh->slot[rank] = buf;
    pthread_barrier_wait(&sh->bar);
    double *tmp = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) {
        double s = 0;
        float fs = 0;
        for (int r = 0; r < sh->size; r++) {
            if (dbl)
                s += ((double *)sh->slot[r])[i];
            else
                fs += ((float *)sh->slot[r])[i];
        }
        tmp[i] = dbl ? s : fs;
    }
    pthread_barrier_wait(&sh->bar);
    for (int64_t i = 0; i < n; i++) {
        if (dbl)
            ((double *)buf)[i] = tmp[i];
        else
            ((float *)buf)[i] = (float)tmp[i];
    }
    free(tmp);
    pthread_barrier_wait(&sh->bar);
}

static mge_status c_iallreduce(mge_comm *c, float *buf, int64_t n, void **req, mge_error *e)
{
    (void)e;
    rank_comm *rc = (rank_comm *)c;
    sum_posted(rc->sh, c->rank, buf, n, 0);
    *req = buf;
    return MGE_OK;
}

static mge_status c_test(mge_comm *c, void *req, int *done, mge_error *e)
{
    (void)c, (void)req, (void)e;
    *done = 1;
    return MGE_OK;
}

static mge_status c_wait(mge_comm *c, void *req, mge_error *e)
{
    (void)c, (void)req, (void)e;
    return MGE_OK;
}

static mge_status c_allreduce_f64(mge_comm *c, double *buf, int64_t n, mge_error *e)
{
    (void)e;
    sum_posted(((rank_comm *)c)->sh, c->rank, buf, n, 1);
    return MGE_OK;
}

static mge_status c_bcast(mge_comm *c, void *buf, size_t n, int root, mge_error *e)
{
    (void)e;
    shared *sh = ((rank_comm *)c)->sh;
    sh->slot[c->rank] = buf;
    pthread_barrier_wait(&sh->bar);
    if (c->rank != root)
        memcpy(buf, sh->slot[root], n);
    pthread_barrier_wait(&sh->bar);
    return MGE_OK;
}

static mge_status c_allgather_u64(mge_comm *c, const uint64_t *mine, int k, uint64_t *all, mge_error *e)
{
    (void)e;
    shared *sh = ((rank_comm *)c)->sh;
    sh->slot[c->rank] = (void *)mine;
    pthread_barrier_wait(&sh->bar);
    for (int r = 0; r < sh->size; r++)
        memcpy(all + (size_t)r * (size_t)k, sh->slot[r], sizeof(uint64_t) * (size_t)k);
    pthread_barrier_wait(&sh->bar);
    return MGE_OK;
}

static void comm_init(rank_comm *rc, shared *sh, int rank, int size)
{
    memset(rc, 0, sizeof *rc);
    rc->sh = sh;
    rc->c.rank = rank;
    rc->c.size = size;
    rc->c.iallreduce = c_iallreduce;
    rc->c.test = c_test;
    rc->c.wait = c_wait;
    rc->c.allreduce_f64 = c_allreduce_f64;
    rc->c.bcast = c_bcast;
    rc->c.allgather_u64 = c_allgather_u64;
}

/* ---------------------------------------------------------------- nets and data
 * (no bias before the batchnorm: its gradient is 0 in exact arithmetic, so
 * its momentum would hold rounding noise alone, which no tolerance fits) */

static mge_graph *net(int bn)
{
    const char *src = bn ? "input x : f32[N,6]\n"
                           "input label : i32[N]\n"
                           "fc1 = linear(x, out=16, bias=false)\n"
                           "bn1 = batchnorm(fc1)\n"
                           "act1 = relu(bn1)\n"
                           "fc2 = linear(act1, out=3)\n"
                           "loss = cross_entropy(fc2, label)\n"
                           "output fc2\n"
                           "minimize loss\n"
                         : "input x : f32[N,6]\n"
                           "input label : i32[N]\n"
                           "fc1 = linear(x, out=16)\n"
                           "act1 = relu(fc1)\n"
                           "fc2 = linear(act1, out=3)\n"
                           "loss = cross_entropy(fc2, label)\n"
                           "output fc2\n"
                           "minimize loss\n";
    mge_graph *g = NULL;
    if (mge_text_parse(src, strlen(src), ".", &g, &err) || mge_graph_init_params(g, 7, &err)) {
        fprintf(stderr, "net: %s\n", err.msg);
        mge_graph_free(g);
        return NULL;
    }
    return g;
}

/* rows [lo, hi) of global batch k (label = argmax of the first 3 features) */
static void batch_rows(int k, int64_t m, int64_t lo, int64_t hi, mge_tensor *x, mge_tensor *y)
{
    int64_t dx[2] = {hi - lo, 6}, dy[1] = {hi - lo};
    mge_tensor_alloc(x, MGE_F32, 2, dx, &err);
    mge_tensor_alloc(y, MGE_I32, 1, dy, &err);
    mge_rng r;
    mge_rng_seed(&r, 500 + (uint64_t)k);
    for (int64_t i = 0; i < m; i++) {
        float row[6];
        for (int j = 0; j < 6; j++)
            row[j] = mge_rng_normal(&r);
        if (i < lo || i >= hi)
            continue;
        memcpy((float *)x->data + (i - lo) * 6, row, sizeof row);
        int best = 0;
        for (int j = 1; j < 3; j++)
            if (row[j] > row[best])
                best = j;
        ((int32_t *)y->data)[i - lo] = best;
    }
}

typedef struct job {
    mge_trainer *t;
    int rank, size, steps;
    int64_t m;                /* global batch rows (the last step: m_last) */
    int64_t m_last;
    uint64_t hash;
    mge_status s;
    char msg[1100];
} job;

static void *run_rank(void *a)
{
    job *j = a;
    mge_error e;
    mge_error_clear(&e);
    j->s = mge_trainer_bcast(j->t, 0, &e);
    for (int k = 0; k < j->steps && !j->s; k++) {
        int64_t m = k == j->steps - 1 ? j->m_last : j->m;
        int64_t lo = m * j->rank / j->size, hi = m * (j->rank + 1) / j->size;
        mge_tensor x, y;
        batch_rows(k, m, lo, hi, &x, &y);
        const mge_tensor *b[2] = {&x, &y};
        mge_train_result r;
        mge_trainer_set_share(j->t, (double)(hi - lo) / (double)m);
        j->s = mge_trainer_step(j->t, b, 0, k + 1, &r, &e);
        mge_tensor_free(&x);
        mge_tensor_free(&y);
    }
    if (!j->s)
        j->s = mge_trainer_hash(j->t, &j->hash, &e);
    snprintf(j->msg, sizeof j->msg, "%s", e.msg);
    return NULL;
}

static mge_trainer *trainer(const mge_graph *g, mge_optim_kind kind, mge_comm *c, int sync_bn, double bucket_mb)
{
    mge_train_opts o;
    memset(&o, 0, sizeof o);
    mge_optim_defaults(kind, &o.optim);
    o.optim.lr = kind == MGE_OPTIM_SGD ? 0.1 : 0.01;
    o.optim.momentum = kind == MGE_OPTIM_SGD ? 0.9 : 0;
    o.threads = 1;
    o.comm = c;
    o.sync_bn = sync_bn;
    o.bucket_mb = bucket_mb;
    mge_trainer *t = NULL;
    CHECK_OK(mge_trainer_create(g, &o, &t, &err), err);
    return t;
}

/* Largest |a - b| / max |a| over the params and state of two trainers. */
static double max_rel(mge_trainer *a, mge_trainer *b)
{
    const mge_graph *ga = mge_trainer_graph(a), *gb = mge_trainer_graph(b);
    double worst = 0;
    for (int v = 0; v < ga->nvalues; v++) {
        const mge_value *va = &ga->values[v];
        if ((va->kind != MGE_VAL_PARAM && va->kind != MGE_VAL_STATE) || !va->data || va->dtype != MGE_F32)
            continue;
        int w = mge_graph_find(gb, va->name);
        CHECK_MSG(w >= 0, "%s missing", va->name);
        if (w < 0)
            continue;
        const float *x = va->data->data, *y = gb->values[w].data->data;
        int64_t n = mge_tensor_numel(va->data);
        double mx = 1e-30, d = 0;
        for (int64_t i = 0; i < n; i++) {
            mx = fmax(mx, fabs(x[i]));
            d = fmax(d, fabs((double)x[i] - y[i]));
        }
        worst = fmax(worst, d / mx);
    }
    return worst;
}

/* R ranks (threads) against one trainer on the whole global batches. */
static void check_ranks(int R, int bn, int sync_bn, mge_optim_kind kind, int64_t m, int64_t m_last, double tol,
                        double bucket_mb)
{
    mge_graph *g = net(bn);
    if (!g) {
        CHECK(0);
        return;
    }
    shared sh = {.size = R};
    pthread_barrier_init(&sh.bar, NULL, (unsigned)R);
    rank_comm rc[MAXR];
    job jobs[MAXR];
    pthread_t th[MAXR];
    for (int r = 0; r < R; r++) {
        comm_init(&rc[r], &sh, r, R);
        jobs[r] = (job){.t = trainer(g, kind, &rc[r].c, sync_bn, bucket_mb), .rank = r, .size = R, .steps = 5,
                        .m = m, .m_last = m_last};
    }
    for (int r = 0; r < R; r++)
        pthread_create(&th[r], NULL, run_rank, &jobs[r]);
    for (int r = 0; r < R; r++)
        pthread_join(th[r], NULL);
    /* one process: the same trainer without a communicator */
    job one = {.t = trainer(g, kind, NULL, 0, 0), .rank = 0, .size = 1, .steps = 5, .m = m, .m_last = m_last};
    run_rank(&one);
    CHECK_MSG(one.s == MGE_OK, "%s", one.msg);
    for (int r = 0; r < R; r++) {
        CHECK_MSG(jobs[r].s == MGE_OK, "rank %d: %s", r, jobs[r].msg);
        CHECK_MSG(jobs[r].hash == jobs[0].hash, "rank %d holds other bits than rank 0", r);
    }
    double d = max_rel(one.t, jobs[0].t);
    CHECK_MSG(d <= tol, "%d ranks (bn %d, sync %d, %s): %g from one process (tolerance %g)", R, bn, sync_bn,
              kind == MGE_OPTIM_SGD ? "sgd" : "adam", d, tol);
    mge_comm_stats st;
    CHECK(mge_trainer_comm_stats(jobs[0].t, &st) == 1 && st.steps == 5 && st.nbuckets >= 1);
    CHECK(mge_trainer_comm_stats(one.t, &st) == 0);
    for (int r = 0; r < R; r++)
        mge_trainer_free(jobs[r].t);
    mge_trainer_free(one.t);
    pthread_barrier_destroy(&sh.bar);
    mge_graph_free(g);
}

static void test_mlp_two_ranks(void)
{
    check_ranks(2, 0, 0, MGE_OPTIM_SGD, 32, 32, 1e-6, 0);
    check_ranks(2, 0, 0, MGE_OPTIM_ADAM, 32, 32, 1e-5, 0);
}

static void test_mlp_three_ranks_uneven(void)
{
    /* 20 rows over 3 ranks: 6, 7, 7; the last batch 7: 2, 2, 3 */
    check_ranks(3, 0, 0, MGE_OPTIM_SGD, 20, 7, 1e-6, 0);
}

static void test_buckets(void)
{
    /* a bucket per gradient or so: the same result as one bucket */
    check_ranks(2, 0, 0, MGE_OPTIM_SGD, 16, 16, 1e-6, 1e-6);
}

static void test_sync_bn(void)
{
    check_ranks(2, 1, 1, MGE_OPTIM_SGD, 32, 32, 1e-6, 0);
    check_ranks(3, 1, 1, MGE_OPTIM_SGD, 30, 30, 1e-6, 0);
}

/* The training graph: an allreduce right after each gradient's producer,
 * the waits before the updates; batchnorm replaced under sync_bn. */
static void test_graph(void)
{
    mge_graph *g = net(1);
    shared sh = {.size = 2};
    rank_comm rc;
    comm_init(&rc, &sh, 0, 2);
    mge_trainer *t = trainer(g, MGE_OPTIM_SGD, &rc.c, 1, 0);
    const mge_graph *tg = mge_trainer_graph(t);
    int nput = 0, nwait = 0, nsync = 0, nbn = 0, first_wait = -1, last_put = -1;
    for (int i = 0; i < tg->nnodes; i++) {
        const mge_node *n = &tg->nodes[i];
        if (n->op == MGE_OP_ALLREDUCE) {
            nput++;
            last_put = i;
            /* its producer is the node just before it, or an allreduce after that one */
            int p = tg->values[n->in[0]].producer;
            CHECK(p >= 0 && p < i);
            for (int k = p + 1; k < i; k++)
                CHECK(tg->nodes[k].op == MGE_OP_ALLREDUCE);
        }
        if (n->op == MGE_OP_ALLREDUCE_WAIT) {
            nwait++;
            if (first_wait < 0)
                first_wait = i;
        }
        nsync += n->op == MGE_OP_SYNC_BATCHNORM || n->op == MGE_OP_SYNC_BATCHNORM_GRAD;
        nbn += n->op == MGE_OP_BATCHNORM || n->op == MGE_OP_BATCHNORM_GRAD;
    }
    CHECK(nput == 5 && nwait == 5);   /* fc1.weight, bn1 and fc2 weight and bias */
    CHECK(last_put < first_wait);
    CHECK(nsync == 2 && nbn == 0);
    CHECK_OK(mge_graph_validate((mge_graph *)tg, &err), err);
    mge_trainer_free(t);
    mge_graph_free(g);
}

/* The ops outside a distributed trainer: a clear error, not a crash; and
 * their shapes on a symbolic input. */
static void test_ops_alone(void)
{
    static const char *src = "input x : f32[N,4,H,W]\n"
                             "param w : f32[4] init=ones\n"
                             "param b : f32[4] init=zeros\n"
                             "state rm : f32[4] init=zeros\n"
                             "state rv : f32[4] init=ones\n"
                             "y = sync_batchnorm(x, w, b, rm, rv)\n"
                             "z = allreduce(y)\n"
                             "output y, z\n";
    mge_graph *g = NULL;
    CHECK_OK(mge_text_parse(src, strlen(src), ".", &g, &err), err);
    if (!g)
        return;
    CHECK_OK(mge_graph_init_params(g, 1, &err), err);
    int y = mge_graph_find(g, "y"), z = mge_graph_find(g, "z");
    char b[64];
    CHECK(y >= 0 && mge_dim_str(g->values[y].dims[0], b, sizeof b) && strcmp(b, "N") == 0);
    CHECK(y >= 0 && mge_dim_str(g->values[y].dims[3], b, sizeof b) && strcmp(b, "W") == 0);
    CHECK(z >= 0 && g->values[z].dims[2] == g->values[y].dims[2]);
    mge_exec *e = NULL;
    mge_exec_opts eo = {.threads = 1, .training = 1};
    CHECK_OK(mge_exec_create(g, &eo, &e, &err), err);
    int64_t dims[2][4] = {{2, 4, 3, 5}, {1, 4, 2, 2}};
    for (int k = 0; k < 2 && e; k++) {
        mge_tensor x;
        mge_tensor_alloc(&x, MGE_F32, 4, dims[k], &err);
        memset(x.data, 0, x.nbytes);
        const mge_tensor *in[1] = {&x};
        mge_error_clear(&err);
        CHECK(mge_exec_run(e, in, &err) == MGE_ERR_UNSUPPORTED);
        CHECK_MSG(strstr(err.msg, "no communicator") != NULL, "%s", err.msg);
        mge_tensor_free(&x);
    }
    mge_exec_free(e);
    mge_graph_free(g);
}

int main(void)
{
    RUN(test_mlp_two_ranks);
    RUN(test_mlp_three_ranks_uneven);
    RUN(test_buckets);
    RUN(test_sync_bn);
    RUN(test_graph);
    RUN(test_ops_alone);
    return unit_done();
}
