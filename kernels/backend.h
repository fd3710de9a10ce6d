/* backend.h — the one interface between the core and a backend (cpu, sim,
 * cuda, ...). A backend is a versioned table of functions; the core opens
 * one device of it per executor (an instance: its queue, its memory
 * accounting, for cpu its thread pool) and drives it only through this
 * table. cpu and sim are built into libmge; other backends are plugins,
 * libmge-<name>.so, whose entry point mge_backend_entry returns the table
 * (lib/device.c loads them and checks abi).
 *
 * Memory: alloc gives device memory the core never dereferences unless the
 * buffer type says it is host memory. Copies are ordered on the device's
 * queue with its kernels: upload returns once src may be reused (it stages
 * the bytes when it must), download's dst holds the bytes after the next
 * sync or after an event recorded behind it completes.
 *
 * Kernels: kernel() is the query (node, concrete input/output descriptors
 * -> a kernel, or NULL for unsupported); launch() queues it with tensors
 * whose data are this device's buffers. A launch that reports an error
 * after the fact (an asynchronous failure) reports it from the next sync. */
#ifndef MGE_BACKEND_H
#define MGE_BACKEND_H

#include "internal.h"

/* Bumped whenever the table or the structs it passes change shape, or the
 * codes they carry grow (3: dtypes f64 ... u64; a plugin indexing a table
 * by the old MGE_NDTYPES would read past it). */
#define MGE_BACKEND_ABI 3u

typedef struct mge_device mge_device;   /* a backend's opened device */
typedef struct mge_event mge_event;     /* a point on a device's queue */

typedef struct mge_devinfo {
    char name[96];           /* "sim (simulated device)", "NVIDIA H200" */
    size_t mem_total;        /* bytes; 0 when unknown */
    size_t mem_free;
} mge_devinfo;

typedef struct mge_buftype {
    const char *name;        /* "cpu", "sim", "cuda" */
    size_t align;            /* of every buffer alloc returns, and arena offsets */
    int host;                /* 1: the core may read and write the bytes directly */
} mge_buftype;

/* mge_devstats (lib/mge.h): the counters a device keeps. */

typedef struct mge_backend_iface {
    uint32_t abi;            /* MGE_BACKEND_ABI */
    const char *name;        /* "cpu", "sim", "cuda" */

    /* devices */
    int (*device_count)(void);
    /* kernels: the cpu kernel table ("cpu" or "ref") sim runs; ignored elsewhere */
    mge_status (*open)(int index, int threads, const mge_backend *kernels, mge_device **dev, mge_error *err);
    void (*close)(mge_device *dev);
    void (*info)(mge_device *dev, mge_devinfo *out);
    const mge_buftype *(*buftype)(mge_device *dev);

    /* memory */
    void *(*alloc)(mge_device *dev, size_t n);   /* NULL on failure; n == 0 gives a minimal buffer */
    void (*free)(mge_device *dev, void *p);

    /* copies, queue-ordered */
    mge_status (*upload)(mge_device *dev, void *dst, const void *src, size_t n, mge_error *err);
    mge_status (*download)(mge_device *dev, void *dst, const void *src, size_t n, mge_error *err);
    mge_status (*copy)(mge_device *dev, void *dst, const void *src, size_t n, mge_error *err);

    /* queue */
    mge_status (*sync)(mge_device *dev, mge_error *err);
    mge_event *(*event_record)(mge_device *dev);          /* NULL on failure */
    mge_status (*event_wait)(mge_device *dev, mge_event *ev, mge_error *err);   /* the host waits */
    void (*event_free)(mge_device *dev, mge_event *ev);

    /* kernels */
    const mge_kernel *(*kernel)(mge_device *dev, const mge_node *n, int nin, const mge_tdesc *in, int nout,
                                const mge_tdesc *out);
    mge_status (*launch)(mge_device *dev, const mge_kernel *k, const mge_kctx *ctx, const mge_node *n,
                         mge_tensor *const *in, mge_tensor *const *out, mge_error *err);
    void (*stats)(mge_device *dev, mge_devstats *out);

    /* optional: called as each run starts (cpu: OpenBLAS back to one thread,
     * in case the embedding program changed it) */
    void (*begin)(mge_device *dev);
    /* optional: profilers' per-thread hook on the device's worker threads */
    void (*set_task_hook)(mge_device *dev, mge_exec_task_hook fn, void *ud);
    /* optional: the channel block c of the blocked NCHWc layout its conv
     * kernels run fastest in (0: none), for mge-opt's layout pass */
    int (*nchwc_block)(void);
    /* optional: the bf16 arithmetic its kernels run (MGE_BF16_NONE: f32,
     * _AVX512, _AMX) and, in *why (may be NULL), why it is not AMX */
    int (*bf16)(const char **why);

    /* optional (NULL: none): state prepared once per node from its
     * persistent inputs (weights packed at load), released with the executor */
    mge_status (*prepare)(mge_device *dev, const mge_node *n, mge_tensor *const *in, void **state, mge_error *err);
    void (*release)(mge_device *dev, void *state);
    /* optional: record the launches between begin and end once, replay them
     * per run (CUDA graphs) */
    mge_status (*capture_begin)(mge_device *dev, mge_error *err);
    mge_status (*capture_end)(mge_device *dev, mge_error *err);
} mge_backend_iface;

/* A plugin's entry point (libmge-<name>.so): the table for this abi, or
 * NULL when it cannot serve it. */
typedef const mge_backend_iface *(*mge_backend_entry_fn)(uint32_t abi);
#define MGE_BACKEND_ENTRY "mge_backend_entry"

/* The built-in backends. */
const mge_backend_iface *mge_backend_cpu_iface(void);
const mge_backend_iface *mge_backend_sim_iface(void);

/* lib/device.c: a device by name ("cpu", "sim", "sim:0", "cuda", "cuda:1"):
 * the built-in ones, else the plugin libmge-<name>.so found beside libmge
 * or the program, then in MGE_LIBDIR/mge, then in MGE_BACKEND_PATH (a
 * colon-separated list). *index gets the device number (0 when absent). */
mge_status mge_device_backend(const char *spec, const mge_backend_iface **be, int *index, mge_error *err);

#endif
