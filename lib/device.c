/* device.c — device names to backends: cpu and sim are built in; any other
 * name is a plugin, libmge-<name>.so, loaded with dlopen at first use and
 * kept loaded. Where it is looked for, in order: beside the object that
 * holds libmge (libmge.so, or the tool linked with libmge.a), beside the
 * running program, in MGE_LIBDIR/mge (the install's libdir), then in each
 * directory of MGE_BACKEND_PATH. Its entry point must serve this libmge's
 * ABI version, so a plugin built for another libmge is refused by name
 * rather than called through a table of the wrong shape. libmge links no
 * device runtime: the plugin does. */
#include "backend.h"

#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef MGE_LIBDIR
#define MGE_LIBDIR "/usr/local/lib"
#endif

/* the plugin names this build knows of (they need not be installed) */
static const char *const known_plugins[] = {"cuda", NULL};

#define MAX_PLUGINS 8
static struct {
    char name[32];
    const mge_backend_iface *be;
} plugins[MAX_PLUGINS];
static int nplugins;
static pthread_mutex_t plugin_mu = PTHREAD_MUTEX_INITIALIZER;

/* The search directories, in order, into dirs (each up to PATH_MAX). */
static int search_dirs(char dirs[][PATH_MAX], int max)
{
    int n = 0;
    Dl_info info;
    if (dladdr((void *)&mge_device_backend, &info) && info.dli_fname && n < max) {
        const char *slash = strrchr(info.dli_fname, '/');
        if (slash) {
            snprintf(dirs[n], PATH_MAX, "%.*s", (int)(slash - info.dli_fname), info.dli_fname);
            n++;
        }
    }
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0 && n < max) {
        exe[len] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            if (n == 0 || strcmp(dirs[n - 1], exe) != 0)
                snprintf(dirs[n++], PATH_MAX, "%s", exe);
        }
    }
    if (n < max)
        snprintf(dirs[n++], PATH_MAX, "%s/mge", MGE_LIBDIR);
    const char *env = getenv("MGE_BACKEND_PATH");
    while (env && *env && n < max) {
        const char *c = strchr(env, ':');
        size_t l = c ? (size_t)(c - env) : strlen(env);
        if (l > 0 && l < PATH_MAX)
            snprintf(dirs[n++], PATH_MAX, "%.*s", (int)l, env);
        env += l + (c != NULL);
    }
    return n;
}

static int valid_name(const char *s, size_t n)
{
    if (n == 0 || n >= 32)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
            return 0;
    return 1;
}

static mge_status load_plugin(const char *name, const mge_backend_iface **out, mge_error *err)
{
    static char dirs[12][PATH_MAX];
    pthread_mutex_lock(&plugin_mu);
    for (int i = 0; i < nplugins; i++)
        if (strcmp(plugins[i].name, name) == 0) {
            *out = plugins[i].be;
            pthread_mutex_unlock(&plugin_mu);
            return MGE_OK;
        }
    int nd = search_dirs(dirs, 12);
    char tried[768] = "";
    size_t tl = 0;
    mge_status s = MGE_OK;
    for (int i = 0; i < nd; i++) {
        char path[PATH_MAX + 64];
        snprintf(path, sizeof path, "%.4000s/libmge-%s.so", dirs[i], name);
        if (access(path, F_OK) != 0) {
            if (tl < sizeof tried - 1)
                tl += (size_t)snprintf(tried + tl, sizeof tried - tl, "%s%s", tl ? ", " : "", dirs[i]);
            continue;
        }
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *why = dlerror();
            s = mge_error_set(err, MGE_ERR_UNSUPPORTED, "device '%s': cannot load %s: %s", name, path,
                              why ? why : "unknown dlopen error");
            goto out;
        }
        mge_backend_entry_fn entry;
        *(void **)&entry = dlsym(h, MGE_BACKEND_ENTRY);
        if (!entry) {
            dlclose(h);
            s = mge_error_set(err, MGE_ERR_UNSUPPORTED, "device '%s': %s has no %s entry point", name, path,
                              MGE_BACKEND_ENTRY);
            goto out;
        }
        const mge_backend_iface *be = entry(MGE_BACKEND_ABI);
        if (!be || be->abi != MGE_BACKEND_ABI) {
            unsigned got = be ? be->abi : 0;
            dlclose(h);
            if (got)
                s = mge_error_set(err, MGE_ERR_UNSUPPORTED,
                                  "device '%s': %s is built for backend ABI version %u; this libmge needs %u "
                                  "(rebuild the plugin against this mge)",
                                  name, path, got, MGE_BACKEND_ABI);
            else
                s = mge_error_set(err, MGE_ERR_UNSUPPORTED,
                                  "device '%s': %s cannot serve backend ABI version %u (rebuild the plugin "
                                  "against this mge)",
                                  name, path, MGE_BACKEND_ABI);
            goto out;
        }
        if (!be->open || !be->close || !be->alloc || !be->free || !be->upload || !be->download || !be->sync ||
            !be->kernel || !be->launch || !be->event_record || !be->event_wait || !be->event_free) {
            dlclose(h);
            s = mge_error_set(err, MGE_ERR_UNSUPPORTED, "device '%s': %s leaves required functions out", name, path);
            goto out;
        }
        if (nplugins < MAX_PLUGINS) {
            snprintf(plugins[nplugins].name, sizeof plugins[nplugins].name, "%s", name);
            plugins[nplugins++].be = be;
        }
        *out = be;
        goto out;
    }
    s = mge_error_set(err, MGE_ERR_UNSUPPORTED,
                      "device '%s': no plugin libmge-%s.so (looked in %s; MGE_BACKEND_PATH adds directories)", name,
                      name, tried);
out:
    pthread_mutex_unlock(&plugin_mu);
    return s;
}

mge_status mge_device_backend(const char *spec, const mge_backend_iface **be, int *index, mge_error *err)
{
    *be = NULL;
    *index = 0;
    if (!spec || !*spec)
        spec = "cpu";
    const char *colon = strchr(spec, ':');
    size_t n = colon ? (size_t)(colon - spec) : strlen(spec);
    if (colon) {
        char *end;
        long v = strtol(colon + 1, &end, 10);
        if (end == colon + 1 || *end || v < 0 || v > 1023)
            return mge_error_set(err, MGE_ERR_INVALID, "device '%s': expected NAME or NAME:N with N a device number",
                                 spec);
        *index = (int)v;
    }
    char name[32];
    if (!valid_name(spec, n))
        return mge_error_set(err, MGE_ERR_INVALID, "device '%s': not a device name (known: %s)", spec,
                             mge_device_names());
    memcpy(name, spec, n);
    name[n] = 0;
    if (strcmp(name, "cpu") == 0)
        *be = mge_backend_cpu_iface();
    else if (strcmp(name, "sim") == 0)
        *be = mge_backend_sim_iface();
    else {
        mge_status s = load_plugin(name, be, err);
        if (s)
            return s;
    }
    if (*be && (*be)->device_count && *index >= (*be)->device_count())
        return mge_error_set(err, MGE_ERR_INVALID, "device '%s': %s has %d device%s", spec, name,
                             (*be)->device_count(), (*be)->device_count() == 1 ? "" : "s");
    return MGE_OK;
}

static char names_buf[512];

static void add_name(const char *nm, size_t n)
{
    size_t have = strlen(names_buf);
    /* once each */
    for (const char *p = names_buf; *p;) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == n && strncmp(p, nm, n) == 0)
            return;
        p += l;
        while (*p == ',' || *p == ' ')
            p++;
    }
    if (have + n + 3 < sizeof names_buf)
        snprintf(names_buf + have, sizeof names_buf - have, "%s%.*s", have ? ", " : "", (int)n, nm);
}

static void fill_names(void)
{
    static char dirs[12][PATH_MAX];
    add_name("cpu", 3);
    add_name("sim", 3);
    for (int i = 0; known_plugins[i]; i++)
        add_name(known_plugins[i], strlen(known_plugins[i]));
    int nd = search_dirs(dirs, 12);
    for (int i = 0; i < nd; i++) {
        DIR *d = opendir(dirs[i]);
        if (!d)
            continue;
        struct dirent *de;
        while ((de = readdir(d))) {
            size_t l = strlen(de->d_name);
            if (l > 10 && strncmp(de->d_name, "libmge-", 7) == 0 && strcmp(de->d_name + l - 3, ".so") == 0 &&
                valid_name(de->d_name + 7, l - 10))
                add_name(de->d_name + 7, l - 10);
        }
        closedir(d);
    }
}

const char *mge_device_names(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, fill_names);
    return names_buf;
}

int mge_device_known(const char *spec)
{
    if (!spec)
        return 0;
    const char *colon = strchr(spec, ':');
    size_t n = colon ? (size_t)(colon - spec) : strlen(spec);
    const char *names = mge_device_names();
    for (const char *p = names; *p;) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == n && strncmp(p, spec, n) == 0)
            return 1;
        p += l;
        while (*p == ',' || *p == ' ')
            p++;
    }
    return 0;
}

mge_status mge_device_check(const char *spec, mge_error *err)
{
    const mge_backend_iface *be;
    int index;
    mge_status s = mge_device_backend(spec, &be, &index, err);
    if (s)
        return s;
    mge_device *dev;
    if ((s = be->open(index, 1, mge_backend_cpu(), &dev, err))) {
        mge_error_prefix(err, "device '%s'", spec);
        return s;
    }
    be->close(dev);
    return MGE_OK;
}
