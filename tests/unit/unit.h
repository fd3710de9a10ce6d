/* unit.h — a minimal test harness for tests/unit: each test_*.c is one
 * binary; CHECK records a failure and goes on; main() ends with
 * "N passed, N failed" on its own line. */
#ifndef MGE_UNIT_H
#define MGE_UNIT_H
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int unit_failed_checks;
static int unit_pass, unit_fail;

#define CHECK(cond) do { if (!(cond)) { unit_failed_checks++; \
    fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); } } while (0)
#define CHECK_MSG(cond, ...) do { if (!(cond)) { unit_failed_checks++; \
    fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)
/* CHECK_OK(call, err): call returns mge_status and fills the mge_error err. */
#define CHECK_OK(expr, err) do { mge_status s_ = (expr); if (s_ != MGE_OK) { unit_failed_checks++; \
    fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #expr, (err).msg); } } while (0)
#define CHECK_NEAR(a, b, tol) do { double a_ = (a), b_ = (b); if (!(fabs(a_ - b_) <= (tol))) { \
    unit_failed_checks++; fprintf(stderr, "%s:%d: %s = %g, %s = %g, tol %g\n", __FILE__, __LINE__, \
    #a, a_, #b, b_, (double)(tol)); } } while (0)

/* RUN(test_fn) in main(): one test per function. */
#define RUN(fn) do { int before_ = unit_failed_checks; fn(); \
    if (unit_failed_checks == before_) unit_pass++; \
    else { unit_fail++; fprintf(stderr, "FAIL %s\n", #fn); } } while (0)

/* Runs this test binary once more in a child with MGE_CPU_ISA=isa, since
 * the ISA is picked once per process; 0 when the child passed, else 1. */
#include <sys/wait.h>
#include <unistd.h>
static inline int unit_rerun_isa(char **argv, const char *name, const char *isa)
{
    printf("%s: again with MGE_CPU_ISA=%s\n", name, isa);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("MGE_CPU_ISA", isa, 1);
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "%s: the run with MGE_CPU_ISA=%s failed\n", name, isa);
        return 1;
    }
    return 0;
}

/* The same with the cpu kernels' portable loops (MGE_CPU_ISA=baseline),
 * unless an ISA is set already; returns rc, or 1 when the child failed.
 * Call at the end of main. */
static inline int unit_rerun_baseline(char **argv, const char *name, int rc)
{
    if (getenv("MGE_CPU_ISA"))
        return rc;
    return unit_rerun_isa(argv, name, "baseline") ? 1 : rc;
}

/* A macro so __FILE__ names the test file, not this header. */
#define unit_done() unit_done_(__FILE__)
static inline int unit_done_(const char *file)
{
    const char *b = strrchr(file, '/');
    printf("%s: %d passed, %d failed\n", b ? b + 1 : file, unit_pass, unit_fail);
    return unit_fail ? 1 : 0;
}

#ifdef MGE_H
/* FLOPs of node i at batch n (mge_graph_node_flops takes concrete shapes);
 * -1 when the shapes cannot be inferred. */
static inline double unit_flops(const mge_graph *g, int node, int64_t n)
{
    int *nd = malloc(sizeof(int) * (size_t)(g->nvalues + 1));
    int64_t *dims = malloc(sizeof(int64_t) * MGE_MAX_DIMS * (size_t)(g->nvalues + 1));
    double f = -1;
    if (nd && dims && mge_graph_shapes(g, MGE_BATCH(n), nd, dims, NULL) == MGE_OK)
        f = mge_graph_node_flops(g, node, nd, dims);
    free(nd);
    free(dims);
    return f;
}
#endif
#endif
