/* cpu_backend.c — the cpu backend behind kernels/backend.h: host memory,
 * no queue (every call completes before it returns), the thread pool and
 * OpenBLAS's thread count, and the kernel table (cpu's fast kernels over
 * ref's, or ref's alone). */
#include "backend.h"

#include <stdlib.h>
#include <string.h>

struct mge_device {
    const mge_backend *kt;
    mge_pool *pool;
    int threads;
    mge_devstats st;
};

struct mge_event {
    int unused;
};

static int cpu_count(void)
{
    return 1;
}

static mge_status cpu_open(int index, int threads, const mge_backend *kernels, mge_device **out, mge_error *err)
{
    *out = NULL;
    if (index != 0)
        return mge_error_set(err, MGE_ERR_INVALID, "cpu:%d: there is one cpu device, cpu:0", index);
    mge_device *d = calloc(1, sizeof *d);
    if (!d)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    d->kt = kernels ? kernels : mge_backend_cpu();
    d->threads = threads > 0 ? threads : 1;
    if (d->threads > 1 && !(d->pool = mge_pool_create(d->threads))) {
        free(d);
        return mge_error_set(err, MGE_ERR_NOMEM, "cannot create a pool of %d threads", threads);
    }
    *out = d;
    return MGE_OK;
}

static void cpu_close(mge_device *d)
{
    if (!d)
        return;
    mge_pool_free(d->pool);
    free(d);
}

static void cpu_info(mge_device *d, mge_devinfo *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "cpu (%s kernels, %d thread%s)", d->kt->name, d->threads,
             d->threads == 1 ? "" : "s");
}

static const mge_buftype cpu_buf = {"cpu", 64, 1};

static const mge_buftype *cpu_buftype(mge_device *d)
{
    (void)d;
    return &cpu_buf;
}

static void *cpu_alloc(mge_device *d, size_t n)
{
    (void)d;
    return mge_aligned_alloc(n ? n : 64);
}

static void cpu_free(mge_device *d, void *p)
{
    (void)d;
    mge_aligned_free(p);
}

static mge_status cpu_copy(mge_device *d, void *dst, const void *src, size_t n, mge_error *err)
{
    (void)err;
    d->st.d2d++;
    d->st.d2d_bytes += (int64_t)n;
    if (n)
        memcpy(dst, src, n);
    return MGE_OK;
}

static mge_status cpu_sync(mge_device *d, mge_error *err)
{
    (void)d;
    (void)err;
    return MGE_OK;
}

static mge_event cpu_done;

static mge_event *cpu_event_record(mge_device *d)
{
    (void)d;
    return &cpu_done;
}

static mge_status cpu_event_wait(mge_device *d, mge_event *ev, mge_error *err)
{
    (void)d;
    (void)ev;
    (void)err;
    return MGE_OK;
}

static void cpu_event_free(mge_device *d, mge_event *ev)
{
    (void)d;
    (void)ev;
}

static const mge_kernel *cpu_kernel(mge_device *d, const mge_node *n, int nin, const mge_tdesc *in, int nout,
                                    const mge_tdesc *out)
{
    (void)nout;
    (void)out;
    const mge_kernel *k = mge_backend_kernel(d->kt, n->op, nin > 0 ? in[0].dtype : MGE_F32);
    return k && k->run ? k : NULL;
}

static mge_status cpu_launch(mge_device *d, const mge_kernel *k, const mge_kctx *ctx, const mge_node *n,
                             mge_tensor *const *in, mge_tensor *const *out, mge_error *err)
{
    mge_kctx c = *ctx;
    c.pool = d->pool;
    c.threads = d->threads;
    return k->run(&c, n, in, out, err);
}

static void cpu_stats(mge_device *d, mge_devstats *out)
{
    *out = d->st;
}

static void cpu_begin(mge_device *d)
{
    (void)d;
    /* our pool splits BLAS calls (kernels/cpu/cpu_blas.c) */
    mge_blas_set_threads(1);
}

static void cpu_set_task_hook(mge_device *d, mge_exec_task_hook fn, void *ud)
{
    mge_pool_set_hook(d->pool, fn, ud);
}

static int cpu_bf16(const char **why)
{
    if (why)
        *why = mge_cpu_bf16_note();
    return mge_cpu_bf16();
}

static int cpu_nchwc_block(void)
{
    int isa = mge_cpu_isa();
    return isa >= MGE_ISA_AVX512 ? 16 : isa >= MGE_ISA_AVX2 ? 8 : 0;
}

static const mge_backend_iface cpu_iface = {
    .abi = MGE_BACKEND_ABI,
    .name = "cpu",
    .device_count = cpu_count,
    .open = cpu_open,
    .close = cpu_close,
    .info = cpu_info,
    .buftype = cpu_buftype,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .copy = cpu_copy,
    .sync = cpu_sync,
    .event_record = cpu_event_record,
    .event_wait = cpu_event_wait,
    .event_free = cpu_event_free,
    .kernel = cpu_kernel,
    .launch = cpu_launch,
    .stats = cpu_stats,
    .begin = cpu_begin,
    .set_task_hook = cpu_set_task_hook,
    .nchwc_block = cpu_nchwc_block,
    .bf16 = cpu_bf16,
};

const mge_backend_iface *mge_backend_cpu_iface(void)
{
    return &cpu_iface;
}
