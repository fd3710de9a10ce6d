/* testnull.c — a device plugin for the tests (libmge-testnull.so): host
 * memory, no queue, and no kernels at all, so every node falls back to the
 * host and only the loader, the ABI check and the copies are exercised.
 * Built with -DBAD_ABI it reports another ABI version (libmge-badabi.so),
 * which the loader must refuse. */
#include "backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct mge_device {
    mge_devstats st;
};

struct mge_event {
    int unused;
};

static int count(void)
{
    return 1;
}

static mge_status dev_open(int index, int threads, const mge_backend *kernels, mge_device **out, mge_error *err)
{
    (void)index;
    (void)threads;
    (void)kernels;
    *out = calloc(1, sizeof **out);
    if (!*out) {
        if (err) {
            err->code = MGE_ERR_NOMEM;
            snprintf(err->msg, sizeof err->msg, "out of memory");
        }
        return MGE_ERR_NOMEM;
    }
    return MGE_OK;
}

static void dev_close(mge_device *d)
{
    free(d);
}

static void info(mge_device *d, mge_devinfo *out)
{
    (void)d;
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "testnull (a test plugin without kernels)");
}

static void *dev_alloc(mge_device *d, size_t n)
{
    (void)d;
    return aligned_alloc(64, n ? (n + 63) & ~(size_t)63 : 64);
}

static void dev_free(mge_device *d, void *p)
{
    (void)d;
    free(p);
}

static mge_status up(mge_device *d, void *dst, const void *src, size_t n, mge_error *err)
{
    (void)err;
    d->st.uploads++;
    d->st.upload_bytes += (int64_t)n;
    memcpy(dst, src, n);
    return MGE_OK;
}

static mge_status down(mge_device *d, void *dst, const void *src, size_t n, mge_error *err)
{
    (void)err;
    d->st.downloads++;
    d->st.download_bytes += (int64_t)n;
    memcpy(dst, src, n);
    return MGE_OK;
}

static mge_status sync_(mge_device *d, mge_error *err)
{
    (void)d;
    (void)err;
    return MGE_OK;
}

static mge_event ev;

static mge_event *rec(mge_device *d)
{
    (void)d;
    return &ev;
}

static mge_status wait_(mge_device *d, mge_event *e, mge_error *err)
{
    (void)d;
    (void)e;
    (void)err;
    return MGE_OK;
}

static void evfree(mge_device *d, mge_event *e)
{
    (void)d;
    (void)e;
}

static const mge_kernel *kernel(mge_device *d, const mge_node *n, int nin, const mge_tdesc *in, int nout,
                                const mge_tdesc *out)
{
    (void)d, (void)n, (void)nin, (void)in, (void)nout, (void)out;
    return NULL;
}

static mge_status launch(mge_device *d, const mge_kernel *k, const mge_kctx *ctx, const mge_node *n,
                         mge_tensor *const *in, mge_tensor *const *out, mge_error *err)
{
    (void)d, (void)k, (void)ctx, (void)n, (void)in, (void)out;
    if (err) {
        err->code = MGE_ERR_UNSUPPORTED;
        snprintf(err->msg, sizeof err->msg, "testnull runs no kernels");
    }
    return MGE_ERR_UNSUPPORTED;
}

static void stats(mge_device *d, mge_devstats *out)
{
    *out = d->st;
}

static const mge_backend_iface iface = {
#ifdef BAD_ABI
    .abi = MGE_BACKEND_ABI + 100,
    .name = "badabi",
#else
    .abi = MGE_BACKEND_ABI,
    .name = "testnull",
#endif
    .device_count = count,
    .open = dev_open,
    .close = dev_close,
    .info = info,
    .alloc = dev_alloc,
    .free = dev_free,
    .upload = up,
    .download = down,
    .copy = down,
    .sync = sync_,
    .event_record = rec,
    .event_wait = wait_,
    .event_free = evfree,
    .kernel = kernel,
    .launch = launch,
    .stats = stats,
};

const mge_backend_iface *mge_backend_entry(uint32_t abi)
{
    (void)abi;
    return &iface;
}
