/* cli.h — what every mge tool shares: messages, option values, atomic output.
 *
 * Messages: "TOOL: FILE: error: ..." on stderr. Usage errors exit 2 with
 * "Try 'TOOL --help'."; runtime failures exit 1. */
#ifndef MGE_CLI_H
#define MGE_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "mge.h"

extern const char *cli_prog;   /* "mge-run" */
extern int cli_verbose;        /* -v count; -q sets -1 */

/* Call first: the tool name for messages, argv for option errors; installs
 * the handlers that remove unfinished output files. */
void cli_init(const char *prog, char **argv);

/* "prog: [where: ]error: ..."; where may be NULL. */
void cli_error(const char *where, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cli_warn(const char *where, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Shown with -v only. */
void cli_note(const char *where, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints a library error; text-form errors get where:LINE:COL. */
void cli_mge_error(const char *where, const mge_error *err);
/* Usage error: prints the message and the --help hint, exits 2. */
void cli_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* Display name of an input path ("-" -> "<stdin>"). */
const char *cli_name(const char *path);

/* Option values; a bad value is a usage error (exit 2). */
long cli_long(const char *opt, const char *s, long lo, long hi);
uint64_t cli_u64(const char *opt, const char *s);
double cli_double(const char *opt, const char *s, double lo);
/* "A,B": two numbers (--betas, --normalize); anything else is a usage error. */
void cli_double_pair(const char *opt, const char *s, double *a, double *b);

/* Options every tool shares. Returns 1 when c was one of them. */
enum {
    CLI_OPT_THREADS = 1000,
    CLI_OPT_DEVICE,
    CLI_OPT_VERSION,
    CLI_OPT_HELP,
    CLI_OPT_FIRST_TOOL = 1100   /* tools number their long-only options from here */
};
#define CLI_LONG_COMMON \
    {"threads", 1, 0, CLI_OPT_THREADS}, {"device", 1, 0, CLI_OPT_DEVICE}, \
    {"version", 0, 0, CLI_OPT_VERSION}, {"help", 0, 0, CLI_OPT_HELP}, \
    {"quiet", 0, 0, 'q'}, {"verbose", 0, 0, 'v'}, {"force", 0, 0, 'f'}
typedef struct cli_common {
    int threads;        /* 0: not given (see cli_threads) */
    int force;
    const char *device;
} cli_common;
/* Handles --threads, --device, --version, -q, -v, -f, '?' and ':'.
 * --help calls help() (which prints to stdout) and exits 0. */
int cli_common_opt(int c, const char *arg, cli_common *co, void (*help)(void));
/* --threads, or the number of online CPUs (at most 256) when not given. */
int cli_threads(const cli_common *co);
/* Checks --device: a name the build does not know is a usage error (exit
 * 2, listing the known ones); a known one whose plugin is missing or whose
 * device does not open fails (exit 1, saying why). */
void cli_check_device(const char *dev);

/* ---------------------------------------------------------------- output
 * An output is stdout or a file written to a temporary name in the same
 * directory, fsynced and renamed over the target by cli_out_commit. A tool
 * that exits or is killed by SIGINT/SIGTERM/SIGHUP before the commit leaves
 * no file behind. */
typedef struct cli_out {
    FILE *f;
    const char *path;   /* NULL: stdout */
    char *tmp;
    int slot;
} cli_out;

/* binary: refuse a terminal unless force. Prints and returns -1 on failure. */
int cli_out_open(cli_out *o, const char *path, int binary, int force);
/* Flushes, syncs, renames. Prints and returns -1 on failure (temp removed). */
int cli_out_commit(cli_out *o);
void cli_out_abort(cli_out *o);
/* The whole thing in one go. */
int cli_write_buf(const char *path, const mge_buf *b, int binary, int force);
/* After text printed with printf: flushes stdout; on a write error (a full
 * disk, a closed pipe) prints "<stdout>: error: write failed: ..." and
 * returns -1. */
int cli_stdout_flush(void);

/* Reads a whole input ("-" = stdin; refused on a terminal, see
 * cli_stdin_ready). Prints and returns -1 on failure. */
int cli_slurp(const char *path, void **buf, size_t *n, int *mapped);

/* mge_model_load that also refuses an empty model and a model typed on a
 * terminal (cli_stdin_ready). Prints and returns -1 on failure. */
int cli_model_load(const char *path, mge_graph **g);
/* The same; *printed tells whether the model is text a printer wrote
 * (mge-dump, mge-opt -S), which holds no parameter values. */
int cli_model_load_printed(const char *path, mge_graph **g, int *printed);
/* The same with loading options (lo may be NULL). With needs_err, a load
 * that fails for want of input values (lo->needs filled) is not printed:
 * its error goes to *needs_err and 1 is returned. */
int cli_model_load_opts(const char *path, const mge_load_opts *lo, mge_graph **g, int *printed, mge_error *needs_err);
/* --bind NAME=FILE.npy: the first record of FILE into l under NAME.
 * Prints and returns -1 on failure; a malformed argument is a usage error. */
int cli_bind_arg(mge_tlist *l, const char *opt, const char *arg);
/* The warning for such a text whose uninit parameters were just
 * initialized at random: trained weights are easy to lose this way. */
void cli_warn_printed(const char *where, int uninit, uint64_t seed);
/* With -v: how many layers of g compute in bf16 and on what (or that this
 * CPU computes them in f32). */
void cli_bf16_note(const char *where, const mge_graph *g);
/* Prints the warnings an import left in the metadata (onnx.warnings: an
 * ONNX output whose declared shape disagrees, ...) and drops the key, so
 * they are said once and not written into the models made from it. */
void cli_import_warnings(const char *where, mge_graph *g);
/* Before reading path "-": stdin on a terminal would wait silently for
 * typed bytes, so it is refused, saying so and how to give the input
 * (hint; NULL: "give a FILE or redirect stdin"); after -f it is read, with
 * a line saying so. what: "a model", "NPY records". Returns -1 after
 * printing when refused; 0 for any other path. */
int cli_stdin_ready(const char *path, const char *what, const char *hint);

/* Element i of t as a double (--check, --verify): quantized values are
 * dequantized when their scale is per tensor. */
double cli_tensor_value(const mge_tensor *t, int64_t i);
/* A JSON string literal of s (quotes, backslashes, control characters escaped). */
void cli_json_str(mge_buf *b, const char *s);
/* Bytes for people: "512 B", "1.5 KiB", "44.6 MiB", "1.25 GiB"; returns buf. */
const char *cli_human_bytes(double bytes, char *buf, size_t n);
/* Bytes of value v of g at the concrete shapes ndims/dims (mge_graph_shapes). */
double cli_value_bytes(const mge_graph *g, const int *ndims, const int64_t *dims, int v);
/* The CPU's model name from /proc/cpuinfo ("unknown" when absent); tabs become spaces. */
const char *cli_cpu_model(void);

/* Directory part of path for resolving relative names ("." for stdin). */
char *cli_dirname(const char *path);

#endif
