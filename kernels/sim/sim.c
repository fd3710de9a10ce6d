/* sim.c — a simulated device, so placement, copies, fallback and
 * asynchrony are tested where there is no GPU.
 *
 * Its memory is its own (malloc'd blocks with a header; filled with 0xff,
 * NaN in every float dtype, when allocated and when freed, so a read of
 * memory nobody uploaded or of a freed buffer shows); its queue is a thread
 * of its own that runs kernels and copies in submission order, so the host
 * goes on while they run and only sync and events order the two. Its
 * kernels are the cpu (or ref) ones, run serially on its buffers.
 *
 * Nodes with weights (conv2d, linear and their fused forms) get prepared
 * state once, as a GPU backend would pack weights at load: a record of the
 * weight buffer each launch checks it is given.
 *
 * Which ops it claims comes from MGE_SIM_OPS: "all", "none", "default"
 * (everything except the pooling ops and softmax/log_softmax, forward and
 * gradient, so every model exercises fallback and copies), or a
 * comma-separated list of op names, where "-name" removes one (e.g.
 * "all,-conv2d"). It never claims ops on quantized (qs8/qs32) tensors:
 * their kernels set output scales, which live in host-side tensor headers. */
#include "backend.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define SIM_ALIGN 64

typedef struct job {
    struct job *next;
    enum { JOB_KERNEL, JOB_COPY, JOB_MARK } kind;
    /* kernel */
    const mge_kernel *k;
    mge_kctx ctx;
    const mge_node *n;
    int nin, nout;
    mge_tensor tin[64], tout[4];
    /* copy */
    void *dst;
    const void *src;
    size_t len;
    void *staged;   /* freed after the copy */
} job;

struct mge_event {
    uint64_t ticket;
};

struct mge_device {
    const mge_backend *kt;
    unsigned char claims[MGE_NOPS];
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    job *head, *tail;
    uint64_t submitted, completed;
    int stop;
    mge_status async_status;
    char async_msg[1024];
    mge_devstats st;
};

/* ---------------------------------------------------------------- op subset */

static int default_claim(int op)
{
    const mge_opinfo *oi = mge_op_info(op);
    if (strcmp(oi->family, "pool") == 0)
        return 0;
    switch (op) {
    case MGE_OP_SOFTMAX: case MGE_OP_LOG_SOFTMAX: case MGE_OP_SOFTMAX_GRAD: case MGE_OP_LOG_SOFTMAX_GRAD:
    case MGE_OP_MAXPOOL2D_NCHWC:
        return 0;
    default:
        return 1;
    }
}

static void claim_default(unsigned char *c)
{
    for (int op = 0; op < MGE_NOPS; op++)
        c[op] = (unsigned char)default_claim(op);
}

static mge_status parse_claims(unsigned char *c, mge_error *err)
{
    const char *s = getenv("MGE_SIM_OPS");
    claim_default(c);
    if (!s || !*s || strcmp(s, "default") == 0)
        return MGE_OK;
    memset(c, 0, MGE_NOPS);
    const char *p = s;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        int neg = n > 0 && p[0] == '-';
        const char *w = p + neg;
        size_t wn = n - (size_t)neg;
        if (wn == 3 && strncmp(w, "all", 3) == 0) {
            memset(c, !neg, MGE_NOPS);
        } else if (wn == 4 && strncmp(w, "none", 4) == 0) {
            memset(c, 0, MGE_NOPS);
        } else if (wn == 7 && strncmp(w, "default", 7) == 0) {
            claim_default(c);
        } else if (wn > 0) {
            int op = mge_op_lookup(w, wn);
            if (op < 0)
                return mge_error_set(err, MGE_ERR_INVALID, "MGE_SIM_OPS: unknown op '%.*s' (expected op names, all, none, default)",
                                     (int)wn, w);
            c[op] = (unsigned char)!neg;
        }
        p += n;
        if (*p == ',')
            p++;
    }
    return MGE_OK;
}

/* What prepare keeps: the weight buffer it saw. */
typedef struct prep {
    const void *weight;
} prep;

static int has_weights(int op)
{
    return op == MGE_OP_CONV2D || op == MGE_OP_LINEAR || op == MGE_OP_FUSED_CONV2D || op == MGE_OP_FUSED_LINEAR;
}

/* ---------------------------------------------------------------- the queue */

static void run_job(mge_device *d, job *j)
{
    if (j->kind == JOB_COPY) {
        memcpy(j->dst, j->src, j->len);
        free(j->staged);
        return;
    }
    if (j->kind != JOB_KERNEL)
        return;
    mge_tensor *in[64], *out[4];
    for (int i = 0; i < j->nin; i++)
        in[i] = &j->tin[i];
    for (int i = 0; i < j->nout; i++)
        out[i] = &j->tout[i];
    mge_error err = {0};
    mge_status s = j->k->run(&j->ctx, j->n, in, out, &err);
    if (s) {
        pthread_mutex_lock(&d->mu);
        if (!d->async_status) {
            d->async_status = s;
            snprintf(d->async_msg, sizeof d->async_msg, "%.200s: %.800s", j->n->name, err.msg);
        }
        pthread_mutex_unlock(&d->mu);
    }
}

static void *queue_main(void *arg)
{
    mge_device *d = arg;
    pthread_mutex_lock(&d->mu);
    for (;;) {
        while (!d->head && !d->stop)
            pthread_cond_wait(&d->work, &d->mu);
        if (!d->head)
            break;
        job *j = d->head;
        d->head = j->next;
        if (!d->head)
            d->tail = NULL;
        pthread_mutex_unlock(&d->mu);
        run_job(d, j);
        free(j);
        pthread_mutex_lock(&d->mu);
        d->completed++;
        pthread_cond_broadcast(&d->done);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

static uint64_t submit(mge_device *d, job *j)
{
    pthread_mutex_lock(&d->mu);
    j->next = NULL;
    if (d->tail)
        d->tail->next = j;
    else
        d->head = j;
    d->tail = j;
    uint64_t t = ++d->submitted;
    pthread_cond_signal(&d->work);
    pthread_mutex_unlock(&d->mu);
    return t;
}

static mge_status wait_ticket(mge_device *d, uint64_t t, mge_error *err)
{
    pthread_mutex_lock(&d->mu);
    while (d->completed < t)
        pthread_cond_wait(&d->done, &d->mu);
    mge_status s = d->async_status;
    if (s) {
        mge_error_set(err, s, "sim: %s", d->async_msg);
        d->async_status = MGE_OK;
    }
    pthread_mutex_unlock(&d->mu);
    return s;
}

/* ---------------------------------------------------------------- the table */

static int sim_count(void)
{
    return 1;
}

static void sim_close(mge_device *d);

static mge_status sim_open(int index, int threads, const mge_backend *kernels, mge_device **out, mge_error *err)
{
    (void)threads;
    *out = NULL;
    if (index != 0)
        return mge_error_set(err, MGE_ERR_INVALID, "sim:%d: there is one sim device, sim:0", index);
    mge_device *d = calloc(1, sizeof *d);
    if (!d)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    mge_status s = parse_claims(d->claims, err);
    if (s) {
        free(d);
        return s;
    }
    d->kt = kernels ? kernels : mge_backend_cpu();
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->work, NULL);
    pthread_cond_init(&d->done, NULL);
    if (pthread_create(&d->th, NULL, queue_main, d) != 0) {
        pthread_mutex_destroy(&d->mu);
        pthread_cond_destroy(&d->work);
        pthread_cond_destroy(&d->done);
        free(d);
        return mge_error_set(err, MGE_ERR_NOMEM, "sim: cannot start its queue thread");
    }
    *out = d;
    return MGE_OK;
}

static void sim_close(mge_device *d)
{
    if (!d)
        return;
    pthread_mutex_lock(&d->mu);
    d->stop = 1;
    pthread_cond_signal(&d->work);
    pthread_mutex_unlock(&d->mu);
    pthread_join(d->th, NULL);
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->work);
    pthread_cond_destroy(&d->done);
    free(d);
}

static void sim_info(mge_device *d, mge_devinfo *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "sim (simulated device, %s kernels)", d->kt->name);
}

static const mge_buftype sim_buf = {"sim", SIM_ALIGN, 0};

static const mge_buftype *sim_buftype(mge_device *d)
{
    (void)d;
    return &sim_buf;
}

/* A block: the header (its size) takes one alignment unit before the bytes. */
static void *sim_alloc(mge_device *d, size_t n)
{
    if (n == 0)
        n = SIM_ALIGN;
    n = (n + SIM_ALIGN - 1) & ~(size_t)(SIM_ALIGN - 1);
    char *p = aligned_alloc(SIM_ALIGN, n + SIM_ALIGN);
    if (!p)
        return NULL;
    *(size_t *)p = n;
    memset(p + SIM_ALIGN, 0xff, n);
    pthread_mutex_lock(&d->mu);
    d->st.mem_in_use += n;
    if (d->st.mem_in_use > d->st.mem_peak)
        d->st.mem_peak = d->st.mem_in_use;
    pthread_mutex_unlock(&d->mu);
    return p + SIM_ALIGN;
}

static void sim_free(mge_device *d, void *q)
{
    if (!q)
        return;
    char *p = (char *)q - SIM_ALIGN;
    size_t n = *(size_t *)p;
    memset(q, 0xff, n);
    pthread_mutex_lock(&d->mu);
    d->st.mem_in_use -= n;
    pthread_mutex_unlock(&d->mu);
    free(p);
}

/* A copy on the queue, counted in *calls and *bytes; stage: the caller may
 * reuse src as soon as we return. */
static mge_status queue_copy(mge_device *d, void *dst, const void *src, size_t n, int stage, int64_t *calls,
                             int64_t *bytes, mge_error *err)
{
    pthread_mutex_lock(&d->mu);
    (*calls)++;
    *bytes += (int64_t)n;
    pthread_mutex_unlock(&d->mu);
    job *j = calloc(1, sizeof *j);
    if (!j)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    j->kind = JOB_COPY;
    j->dst = dst;
    j->src = src;
    j->len = n;
    if (stage && n) {
        if (!(j->staged = malloc(n))) {
            free(j);
            return mge_error_set(err, MGE_ERR_NOMEM, "sim: cannot stage an upload of %zu bytes", n);
        }
        memcpy(j->staged, src, n);
        j->src = j->staged;
    }
    submit(d, j);
    return MGE_OK;
}

static mge_status sim_upload(mge_device *d, void *dst, const void *src, size_t n, mge_error *err)
{
    return queue_copy(d, dst, src, n, 1, &d->st.uploads, &d->st.upload_bytes, err);
}

static mge_status sim_download(mge_device *d, void *dst, const void *src, size_t n, mge_error *err)
{
    return queue_copy(d, dst, src, n, 0, &d->st.downloads, &d->st.download_bytes, err);
}

static mge_status sim_copy(mge_device *d, void *dst, const void *src, size_t n, mge_error *err)
{
    return queue_copy(d, dst, src, n, 0, &d->st.d2d, &d->st.d2d_bytes, err);
}

static mge_status sim_sync(mge_device *d, mge_error *err)
{
    pthread_mutex_lock(&d->mu);
    uint64_t t = d->submitted;
    pthread_mutex_unlock(&d->mu);
    return wait_ticket(d, t, err);
}

static mge_event *sim_event_record(mge_device *d)
{
    mge_event *ev = malloc(sizeof *ev);
    if (!ev)
        return NULL;
    job *j = calloc(1, sizeof *j);
    if (!j) {
        free(ev);
        return NULL;
    }
    j->kind = JOB_MARK;
    ev->ticket = submit(d, j);
    return ev;
}

static mge_status sim_event_wait(mge_device *d, mge_event *ev, mge_error *err)
{
    return wait_ticket(d, ev->ticket, err);
}

static void sim_event_free(mge_device *d, mge_event *ev)
{
    (void)d;
    free(ev);
}

static const mge_kernel *sim_kernel(mge_device *d, const mge_node *n, int nin, const mge_tdesc *in, int nout,
                                    const mge_tdesc *out)
{
    if (n->op < 0 || n->op >= MGE_NOPS || !d->claims[n->op] || nin > 64 || nout > 4)
        return NULL;
    for (int i = 0; i < nin; i++)
        if (in[i].dtype == MGE_QS8 || in[i].dtype == MGE_QS32)
            return NULL;
    for (int i = 0; i < nout; i++)
        if (out[i].dtype == MGE_QS8 || out[i].dtype == MGE_QS32)
            return NULL;
    const mge_kernel *k = mge_backend_kernel(d->kt, n->op, nin > 0 ? in[0].dtype : MGE_F32);
    return k && k->run ? k : NULL;
}

static mge_status sim_launch(mge_device *d, const mge_kernel *k, const mge_kctx *ctx, const mge_node *n,
                             mge_tensor *const *in, mge_tensor *const *out, mge_error *err)
{
    if (n->nin > 64 || n->nout > 4)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: too many inputs or outputs for sim", n->name);
    const prep *pp = ctx->prepared;
    if (has_weights(n->op) && n->nin >= 2 && (!pp || pp->weight != in[1]->data))
        return mge_error_set(err, MGE_ERR_INVALID, "%s: launched without the state prepare() made for it", n->name);
    job *j = calloc(1, sizeof *j);
    if (!j)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    j->kind = JOB_KERNEL;
    j->k = k;
    j->ctx = *ctx;
    j->ctx.pool = NULL;   /* serial on the queue thread */
    j->ctx.threads = 1;
    j->n = n;
    j->nin = n->nin;
    j->nout = n->nout;
    for (int i = 0; i < n->nin; i++) {
        j->tin[i] = *in[i];
        j->tin[i].flags &= ~(unsigned)MGE_TENSOR_OWNED;
    }
    for (int i = 0; i < n->nout; i++) {
        j->tout[i] = *out[i];
        j->tout[i].flags &= ~(unsigned)MGE_TENSOR_OWNED;
    }
    pthread_mutex_lock(&d->mu);
    d->st.launches++;
    pthread_mutex_unlock(&d->mu);
    submit(d, j);
    return MGE_OK;
}

static mge_status sim_prepare(mge_device *d, const mge_node *n, mge_tensor *const *in, void **state, mge_error *err)
{
    *state = NULL;
    if (!has_weights(n->op) || n->nin < 2)
        return MGE_OK;
    prep *p = malloc(sizeof *p);
    if (!p)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    p->weight = in[1]->data;
    *state = p;
    pthread_mutex_lock(&d->mu);
    d->st.prepared++;
    pthread_mutex_unlock(&d->mu);
    return MGE_OK;
}

static void sim_release(mge_device *d, void *state)
{
    if (!state)
        return;
    free(state);
    pthread_mutex_lock(&d->mu);
    d->st.prepared--;
    pthread_mutex_unlock(&d->mu);
}

static void sim_stats(mge_device *d, mge_devstats *out)
{
    pthread_mutex_lock(&d->mu);
    *out = d->st;
    pthread_mutex_unlock(&d->mu);
}

static const mge_backend_iface sim_iface = {
    .abi = MGE_BACKEND_ABI,
    .name = "sim",
    .device_count = sim_count,
    .open = sim_open,
    .close = sim_close,
    .info = sim_info,
    .buftype = sim_buftype,
    .alloc = sim_alloc,
    .free = sim_free,
    .upload = sim_upload,
    .download = sim_download,
    .copy = sim_copy,
    .sync = sim_sync,
    .event_record = sim_event_record,
    .event_wait = sim_event_wait,
    .event_free = sim_event_free,
    .kernel = sim_kernel,
    .launch = sim_launch,
    .stats = sim_stats,
    .prepare = sim_prepare,
    .release = sim_release,
};

const mge_backend_iface *mge_backend_sim_iface(void)
{
    return &sim_iface;
}
