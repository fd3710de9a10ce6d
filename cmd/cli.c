/* cli.c — messages, option values and atomic output for the mge tools. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *cli_prog = "mge";
int cli_verbose;
static int cli_force;   /* -f: also reads stdin from a terminal (cli_stdin_ready) */
static char **cli_argv;

/* Temporary output files not yet committed. Plain char arrays so the signal
 * handler can unlink them without touching the heap. */
#define CLI_MAX_TMP 8
static char tmp_paths[CLI_MAX_TMP][PATH_MAX];
static volatile sig_atomic_t tmp_used[CLI_MAX_TMP];

static void remove_tmps(void)
{
    for (int i = 0; i < CLI_MAX_TMP; i++)
        if (tmp_used[i]) {
            unlink(tmp_paths[i]);
            tmp_used[i] = 0;
        }
}

static void on_signal(int sig)
{
    remove_tmps();
    signal(sig, SIG_DFL);
    raise(sig);
}

void cli_init(const char *prog, char **argv)
{
    cli_prog = prog;
    cli_argv = argv;
    /* Before any work: OpenBLAS's kernel choice is fixed when it loads, so a
     * CPU it misjudged is fixed by running again with OPENBLAS_CORETYPE set
     * (kernels/cpu/cpu_blas.c). A user's own OPENBLAS_CORETYPE is respected. */
    if (!getenv("OPENBLAS_CORETYPE")) {
        const char *core = mge_blas_better_coretype();
        if (core && setenv("OPENBLAS_CORETYPE", core, 1) == 0)
            execv("/proc/self/exe", argv);   /* returns only on failure: go on with what we have */
    }
    atexit(remove_tmps);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        /* A signal the caller ignores (nohup, background jobs) stays ignored. */
        struct sigaction old;
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
            continue;
        sigaction(sigs[i], &sa, NULL);
    }
}

/* ---------------------------------------------------------------- messages */

static void vmsg(const char *kind, const char *where, const char *fmt, va_list ap)
{
    fflush(stdout);
    if (where)
        fprintf(stderr, "%s: %s: %s: ", cli_prog, where, kind);
    else
        fprintf(stderr, "%s: %s: ", cli_prog, kind);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void cli_error(const char *where, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmsg("error", where, fmt, ap);
    va_end(ap);
}

void cli_warn(const char *where, const char *fmt, ...)
{
    if (cli_verbose < 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vmsg("warning", where, fmt, ap);
    va_end(ap);
}

void cli_note(const char *where, const char *fmt, ...)
{
    if (cli_verbose <= 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vmsg("note", where, fmt, ap);
    va_end(ap);
}

void cli_mge_error(const char *where, const mge_error *err)
{
    const char *msg = err && err->msg[0] ? err->msg : "failed";
    /* Library messages about a file may name it already. */
    size_t wl = where ? strlen(where) : 0;
    if (wl && strncmp(msg, where, wl) == 0 && msg[wl] == ':' && msg[wl + 1] == ' ')
        msg += wl + 2;
    if (err && err->line > 0) {
        char loc[PATH_MAX + 64];
        if (err->col > 0)
            snprintf(loc, sizeof loc, "%s:%d:%d", where ? where : "<input>", err->line, err->col);
        else
            snprintf(loc, sizeof loc, "%s:%d", where ? where : "<input>", err->line);
        cli_error(loc, "%s", msg);
    } else {
        cli_error(where, "%s", msg);
    }
}

void cli_usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", cli_prog);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry '%s --help'.\n", cli_prog);
    exit(2);
}

const char *cli_name(const char *path)
{
    return !path || strcmp(path, "-") == 0 ? "<stdin>" : path;
}

char *cli_dirname(const char *path)
{
    if (!path || strcmp(path, "-") == 0)
        return strdup(".");
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup(".");
    if (slash == path)
        return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

/* ---------------------------------------------------------------- option values */

long cli_long(const char *opt, const char *s, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno)
        cli_usage("%s: '%s' is not an integer", opt, s);
    if (v < lo || v > hi)
        cli_usage("%s: %ld is out of range (%ld..%ld)", opt, v, lo, hi);
    return v;
}

uint64_t cli_u64(const char *opt, const char *s)
{
    char *end;
    errno = 0;
    if (!*s || *s == '-')
        cli_usage("%s: '%s' is not a non-negative integer", opt, s);
    unsigned long long v = strtoull(s, &end, 0);
    if (*end || errno)
        cli_usage("%s: '%s' is not a non-negative integer", opt, s);
    return (uint64_t)v;
}

double cli_double(const char *opt, const char *s, double lo)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !isfinite(v))
        cli_usage("%s: '%s' is not a number", opt, s);
    if (v < lo)
        cli_usage("%s: %g is below %g", opt, v, lo);
    return v;
}

int cli_threads(const cli_common *co)
{
    if (co->threads > 0)
        return co->threads;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 256 ? 256 : (int)n;
}

void cli_check_device(const char *dev)
{
    if (!dev || strcmp(dev, "cpu") == 0)
        return;
    const char *colon = strchr(dev, ':');
    if (!mge_device_known(dev))
        cli_usage("--device: unknown device '%s' (this build knows: %s; NAME:N picks device N)", dev,
                  mge_device_names());
    if (colon) {
        char *end;
        errno = 0;
        long n = strtol(colon + 1, &end, 10);
        if (!colon[1] || *end || errno || n < 0)
            cli_usage("--device: bad device '%s' (expected NAME or NAME:N, e.g. cuda:0)", dev);
    }
    mge_error err = {0};
    if (mge_device_check(dev, &err)) {
        cli_error(NULL, "--device %s: %s", dev, err.msg);
        exit(1);
    }
}

int cli_common_opt(int c, const char *arg, cli_common *co, void (*help)(void))
{
    switch (c) {
    case CLI_OPT_THREADS:
        co->threads = (int)cli_long("--threads", arg, 1, 256);
        return 1;
    case CLI_OPT_DEVICE:
        co->device = arg;
        return 1;
    case CLI_OPT_VERSION:
        printf("%s (mge) %s\n", cli_prog, MGE_VERSION_STRING);
        exit(cli_stdout_flush() ? 1 : 0);
    case CLI_OPT_HELP:
    case 'h':
        help();
        exit(cli_stdout_flush() ? 1 : 0);
    case 'q':
        cli_verbose = -1;
        return 1;
    case 'v':
        cli_verbose = cli_verbose < 0 ? 1 : cli_verbose + 1;
        return 1;
    case 'f':
        co->force = 1;
        cli_force = 1;
        return 1;
    case ':': {
        const char *a = cli_argv && optind > 0 ? cli_argv[optind - 1] : "?";
        if (optopt && a[0] == '-' && a[1] != '-')
            cli_usage("option requires an argument -- '%c'", optopt);
        cli_usage("option '%s' requires an argument", a);
    }
    case '?': {
        const char *a = cli_argv && optind > 0 ? cli_argv[optind - 1] : "?";
        if (optopt)
            cli_usage("invalid option -- '%c'", optopt);
        cli_usage("unrecognized option '%s'", a);
    }
    }
    return 0;
}

/* ---------------------------------------------------------------- output */

int cli_out_open(cli_out *o, const char *path, int binary, int force)
{
    memset(o, 0, sizeof *o);
    o->slot = -1;
    if (!path || strcmp(path, "-") == 0) {
        if (binary && !force && isatty(STDOUT_FILENO)) {
            cli_error(NULL, "refusing to write binary output to a terminal (use -o FILE, a pipe, or -f)");
            return -1;
        }
        o->f = stdout;
        return 0;
    }
    /* Devices, pipes and the like (-o /dev/null, a FIFO) are written in
     * place: renaming a file over them would replace the device node. */
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        if (S_ISDIR(sb.st_mode)) {
            cli_error(path, "is a directory");
            return -1;
        }
        if (binary && !force && S_ISCHR(sb.st_mode)) {
            int fd = open(path, O_WRONLY | O_NOCTTY);
            int tty = fd >= 0 && isatty(fd);
            if (fd >= 0)
                close(fd);
            if (tty) {
                cli_error(path, "refusing to write binary output to a terminal (use -f)");
                return -1;
            }
        }
        o->f = fopen(path, "wb");
        if (!o->f) {
            cli_error(path, "%s", strerror(errno));
            return -1;
        }
        o->path = path;
        return 0;
    }
    int slot = -1;
    for (int i = 0; i < CLI_MAX_TMP; i++)
        if (!tmp_used[i]) {
            slot = i;
            break;
        }
    char *dir = cli_dirname(path);
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    if (slot < 0 || !dir || strlen(dir) + strlen(base) + 16 >= PATH_MAX) {
        free(dir);
        cli_error(path, "cannot create a temporary file");
        return -1;
    }
    snprintf(tmp_paths[slot], PATH_MAX, "%s/.%s.XXXXXX", dir, base);
    free(dir);
    /* Block the cleanup signals while the name is being registered. */
    sigset_t all, old;
    sigemptyset(&all);
    sigaddset(&all, SIGINT);
    sigaddset(&all, SIGTERM);
    sigaddset(&all, SIGHUP);
    sigprocmask(SIG_BLOCK, &all, &old);
    int fd = mkstemp(tmp_paths[slot]);
    if (fd >= 0)
        tmp_used[slot] = 1;
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (fd < 0) {
        cli_error(path, "cannot create a file in its directory: %s", strerror(errno));
        return -1;
    }
    /* mkstemp makes 0600; give the file the mode a plain create would. */
    mode_t um = umask(0);
    umask(um);
    fchmod(fd, 0666 & ~um);
    o->f = fdopen(fd, "wb");
    if (!o->f) {
        close(fd);
        unlink(tmp_paths[slot]);
        tmp_used[slot] = 0;
        cli_error(path, "%s", strerror(errno));
        return -1;
    }
    o->path = path;
    o->tmp = tmp_paths[slot];
    o->slot = slot;
    return 0;
}

int cli_out_commit(cli_out *o)
{
    if (!o->f)
        return -1;
    errno = 0;
    if (!o->path) {
        o->f = NULL;
        return cli_stdout_flush();
    }
    if (o->slot < 0) { /* written in place */
        int bad = fflush(o->f) != 0 || ferror(o->f);
        int e = errno ? errno : EIO;
        if (fclose(o->f) != 0 && !bad) {
            bad = 1;
            e = errno;
        }
        o->f = NULL;
        if (bad)
            cli_error(o->path, "write failed: %s", strerror(e));
        return bad ? -1 : 0;
    }
    int bad = fflush(o->f) != 0 || ferror(o->f);
    int e = errno ? errno : EIO;
    if (!bad && fsync(fileno(o->f)) != 0 && errno != EINVAL) {
        bad = 1;
        e = errno;
    }
    if (fclose(o->f) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    o->f = NULL;
    if (!bad && rename(o->tmp, o->path) != 0) {
        bad = 1;
        e = errno;
    }
    if (bad) {
        unlink(o->tmp);
        cli_error(o->path, "write failed: %s", strerror(e));
    }
    tmp_used[o->slot] = 0;
    return bad ? -1 : 0;
}

void cli_out_abort(cli_out *o)
{
    if (!o->f)
        return;
    if (o->path && o->slot < 0) {
        fclose(o->f);
    } else if (o->path) {
        fclose(o->f);
        unlink(o->tmp);
        tmp_used[o->slot] = 0;
    } else {
        fflush(stdout);
    }
    o->f = NULL;
}

int cli_write_buf(const char *path, const mge_buf *b, int binary, int force)
{
    if (b->failed) {
        cli_error(NULL, "out of memory");
        return -1;
    }
    cli_out o;
    if (cli_out_open(&o, path, binary, force))
        return -1;
    if (b->n && fwrite(b->p, 1, b->n, o.f) != b->n) {
        cli_error(path ? path : "<stdout>", "write failed: %s", strerror(errno));
        cli_out_abort(&o);
        return -1;
    }
    return cli_out_commit(&o);
}

int cli_stdout_flush(void)
{
    /* a printf that failed earlier (output longer than the buffer) left its
     * errno and the error flag, and may have left nothing to flush */
    int early = ferror(stdout) ? errno : 0;
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout))
        return 0;
    int e = errno ? errno : early ? early : EIO;
    cli_error("<stdout>", "write failed: %s", strerror(e));
    return -1;
}

/* The header the text printer writes (text_print.c): mge-dump and mge-opt
 * -S print it, and what they print carries no parameter values. */
static int printed_text(const void *buf, size_t n)
{
    static const char head[] = "# mge text form";
    return n >= sizeof head - 1 && memcmp(buf, head, sizeof head - 1) == 0;
}

int cli_model_load_printed(const char *path, mge_graph **g, int *printed)
{
    return cli_model_load_opts(path, NULL, g, printed, NULL);
}

int cli_model_load_opts(const char *path, const mge_load_opts *lo, mge_graph **g, int *printed, mge_error *needs_err)
{
    mge_error err;
    mge_error_clear(&err);
    *g = NULL;
    if (printed)
        *printed = 0;
    if (cli_stdin_ready(path, "a model", NULL))
        return -1;
    mge_status s;
    if (printed && strcmp(path, "-") == 0) {
        /* stdin is read once: look at its head in memory */
        void *buf;
        size_t n;
        int mapped;
        if (mge_file_slurp(path, &buf, &n, &mapped, &err)) {
            cli_mge_error(cli_name(path), &err);
            return -1;
        }
        *printed = printed_text(buf, n);
        /* no folder: a text model's weights are then relative to ".", and an
         * ONNX model's external data is refused (it has nowhere to come from) */
        s = mge_model_load_mem_opts(buf, n, NULL, lo, g, &err);
        mge_file_unslurp(buf, n, mapped);
    } else {
        if (printed) {
            char head[32];
            FILE *f = fopen(path, "rb");
            if (f) {
                *printed = printed_text(head, fread(head, 1, sizeof head, f));
                fclose(f);
            }
        }
        s = mge_model_load_opts(path, lo, g, &err);
    }
    if (s && needs_err && lo && lo->needs && lo->needs->n) {
        *needs_err = err; /* the caller binds the inputs, or says this */
        return 1;
    }
    if (s) {
        /* the library names files of the wrong kind (formats/sniff.c) */
        cli_mge_error(cli_name(path), &err);
        return -1;
    }
    cli_import_warnings(cli_name(path), *g);
    cli_bf16_note(cli_name(path), *g);
    if ((*g)->nvalues == 0) {
        cli_error(cli_name(path), "no model here (the input is empty)");
        mge_graph_free(*g);
        *g = NULL;
        return -1;
    }
    return 0;
}

int cli_bind_arg(mge_tlist *l, const char *opt, const char *arg)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg || !eq[1])
        cli_usage("%s %s: expected NAME=FILE.npy", opt, arg);
    char *name = strndup(arg, (size_t)(eq - arg));
    if (!name) {
        cli_error(NULL, "out of memory");
        return -1;
    }
    if (mge_tlist_find(l, name) >= 0)
        cli_usage("%s: input '%s' is bound twice", opt, name);
    const char *file = eq + 1;
    mge_error err;
    mge_error_clear(&err);
    if (cli_stdin_ready(file, "an NPY record", NULL)) {
        free(name);
        return -1;
    }
    FILE *f = strcmp(file, "-") == 0 ? stdin : fopen(file, "rb");
    if (!f) {
        cli_error(file, "%s", strerror(errno));
        free(name);
        return -1;
    }
    mge_tensor t;
    memset(&t, 0, sizeof t);
    mge_status s = mge_npy_read(f, &t, &err);
    if (f != stdin)
        fclose(f);
    if (s == MGE_ERR_EOF)
        mge_error_set(&err, MGE_ERR_FORMAT, "no NPY record in it");
    if (s || mge_tlist_add(l, name, &t, &err)) {
        cli_error(file, "%s %s: %s", opt, arg, err.msg);
        mge_tensor_free(&t);
        free(name);
        return -1;
    }
    free(name);
    return 0;
}

void cli_import_warnings(const char *where, mge_graph *g)
{
    for (int i = 0; i < g->nmeta; i++) {
        if (strcmp(g->meta[i].key, "onnx.warnings") != 0)
            continue;
        const char *p = g->meta[i].value;
        while (p && *p) {
            const char *e = strchr(p, '\n');
            int len = e ? (int)(e - p) : (int)strlen(p);
            if (len)
                cli_warn(where, "%.*s", len, p);
            p += len + (e ? 1 : 0);
        }
        free(g->meta[i].key);
        free(g->meta[i].value);
        memmove(&g->meta[i], &g->meta[i + 1], sizeof *g->meta * (size_t)(g->nmeta - i - 1));
        g->nmeta--;
        return;
    }
}

void cli_bf16_note(const char *where, const mge_graph *g)
{
    if (cli_verbose <= 0)
        return;
    int n = mge_graph_bf16_count(g);
    if (!n)
        return;
    const char *name = "", *why = "";
    if (mge_cpu_bf16_kernels(&name, &why))
        cli_note(where, "%d bf16 layer%s run on %s%s%s%s", n, n == 1 ? "" : "s", name, *why ? " (" : "", why,
                 *why ? ")" : "");
    else
        cli_note(where, "%d bf16 layer%s compute in f32 here: %s", n, n == 1 ? "" : "s", why);
}

int cli_model_load(const char *path, mge_graph **g)
{
    return cli_model_load_printed(path, g, NULL);
}

void cli_warn_printed(const char *where, int uninit, uint64_t seed)
{
    cli_warn(where,
             "%d parameter%s without values initialized at random (seed %llu): this text was printed by mge-dump "
             "or mge-opt -S, which leave the values out; to keep trained weights, export them "
             "(mge-dump MODEL.mge --params w.npz) and bind them (mge-opt --weights w.npz), or use the .mge itself",
             uninit, uninit == 1 ? "" : "s", (unsigned long long)seed);
}

int cli_stdin_ready(const char *path, const char *what, const char *hint)
{
    if (!path || strcmp(path, "-") != 0 || !isatty(STDIN_FILENO))
        return 0;
    if (cli_force) {
        /* without a word the tool would seem to hang */
        if (cli_verbose >= 0) {
            fflush(stdout);
            fprintf(stderr, "%s: reading %s from the terminal (end it with Ctrl-D)\n", cli_prog, what);
        }
        return 0;
    }
    cli_error(NULL, "not reading %s from a terminal: %s (-f reads the terminal)", what,
              hint ? hint : "give a FILE or redirect stdin");
    return -1;
}

int cli_slurp(const char *path, void **buf, size_t *n, int *mapped)
{
    mge_error err;
    mge_error_clear(&err);
    *buf = NULL;
    *n = 0;
    *mapped = 0;
    if (cli_stdin_ready(path, "the input", NULL))
        return -1;
    if (mge_file_slurp(path, buf, n, mapped, &err)) {
        cli_mge_error(cli_name(path), &err);
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- reports */

const char *cli_human_bytes(double b, char *buf, size_t n)
{
    if (b < 1024)
        snprintf(buf, n, "%.0f B", b);
    else if (b < 1024.0 * 1024)
        snprintf(buf, n, "%.1f KiB", b / 1024);
    else if (b < 1024.0 * 1024 * 1024)
        snprintf(buf, n, "%.1f MiB", b / (1024.0 * 1024));
    else
        snprintf(buf, n, "%.2f GiB", b / (1024.0 * 1024 * 1024));
    return buf;
}

double cli_value_bytes(const mge_graph *g, const int *ndims, const int64_t *dims, int v)
{
    double n = (double)mge_dtype_size(g->values[v].dtype);
    for (int k = 0; k < ndims[v]; k++)
        n *= (double)dims[(size_t)v * MGE_MAX_DIMS + k];
    return n;
}

void cli_json_str(mge_buf *b, const char *s)
{
    mge_buf_put(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            mge_buf_printf(b, "\\%c", *p);
        else if (*p < 0x20)
            mge_buf_printf(b, "\\u%04x", *p);
        else
            mge_buf_put(b, p, 1);
    }
    mge_buf_put(b, "\"", 1);
}

const char *cli_cpu_model(void)
{
    static char model[256];
    if (model[0])
        return model;
    snprintf(model, sizeof model, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return model;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0)
            continue;
        char *c = strchr(line, ':');
        if (!c)
            continue;
        c++;
        while (*c == ' ' || *c == '\t')
            c++;
        size_t n = strcspn(c, "\r\n");
        for (size_t i = 0; i < n; i++)
            if (c[i] == '\t')
                c[i] = ' ';
        if (n > 0 && n < sizeof model)
            snprintf(model, sizeof model, "%.*s", (int)n, c);
        break;
    }
    fclose(f);
    return model;
}

/* Element i of t as a double; quantized values scaled when per tensor. */
double cli_tensor_value(const mge_tensor *t, int64_t i)
{
    const void *d = t->data;
    switch (t->dtype) {
    case MGE_F32: return ((const float *)d)[i];
    case MGE_F16: return mge_f16_to_f32(((const uint16_t *)d)[i]);
    case MGE_BF16: return mge_bf16_to_f32(((const uint16_t *)d)[i]);
    case MGE_I8: return ((const int8_t *)d)[i];
    case MGE_U8: return ((const uint8_t *)d)[i];
    case MGE_I32: return ((const int32_t *)d)[i];
    case MGE_I64: return (double)((const int64_t *)d)[i];
    case MGE_BOOL: return ((const uint8_t *)d)[i] != 0;
    case MGE_F64: case MGE_I16: case MGE_U16: case MGE_U32: case MGE_U64: return mge_dtype_get(t->dtype, d, i);
    case MGE_QS8: return (t->q.nscale == 1 ? t->q.scale[0] : 1) * (((const int8_t *)d)[i] - t->q.zero);
    case MGE_QS32: return (t->q.nscale == 1 ? t->q.scale[0] : 1) * ((const int32_t *)d)[i];
    default: return NAN;
    }
}

void cli_double_pair(const char *opt, const char *s, double *a, double *b)
{
    const char *comma = strchr(s, ',');
    if (!comma)
        cli_usage("%s %s: expected two numbers separated by a comma", opt, s);
    char first[64];
    size_t n = (size_t)(comma - s);
    if (n == 0 || n >= sizeof first)
        cli_usage("%s %s: expected two numbers separated by a comma", opt, s);
    memcpy(first, s, n);
    first[n] = 0;
    *a = cli_double(opt, first, -1e30);
    *b = cli_double(opt, comma + 1, -1e30);
}
