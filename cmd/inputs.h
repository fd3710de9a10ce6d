/* inputs.h — the inputs mge-bench and mge-prof time a model with.
 *
 * Shapes come from --shape NAME=1x3x224x224 (repeatable) and --batch B (the
 * value of the symbolic batch N; default 1). The data is random (seeded:
 * float inputs uniform in [-1, 1), integer inputs class labels in [0, C)
 * when they are the labels of a cross_entropy loss with C classes, else
 * 0..9, bool 0/1), or real records from --input FILE: an NPY stream with
 * one record per needed input, in input order (the first group is used). */
#ifndef MGE_CMD_INPUTS_H
#define MGE_CMD_INPUTS_H

#include "cli.h"

typedef struct bench_shape {
    const char *arg;                 /* the option's text, for messages */
    char *name;
    int ndim;
    int64_t dims[MGE_MAX_DIMS];
} bench_shape;

typedef struct bench_shapes {
    int n, cap;
    bench_shape *s;
} bench_shapes;

/* Adds one --shape NAME=DIMS (DIMS: positive integers joined by 'x' or ',').
 * Bad syntax or a name given twice is a usage error (exits 2). Returns 0, or
 * -1 when out of memory (printed). */
int bench_shape_parse(bench_shapes *s, const char *arg);
void bench_shapes_free(bench_shapes *s);

/* Binds the symbolic dims of template v to dims into b. src[i] says where
 * b's entry i came from (for messages; this call sets the entries it adds
 * to here). Returns 0, or -1 with why set (a rank, a fixed dim, or a
 * symbol given two values, naming both sources). */
int bench_bind_dims(const mge_value *v, int ndim, const int64_t *dims, mge_binding *b, const char **src,
                    const char *here, char *why, size_t n);

typedef struct bench_inputs {
    int n;                   /* inputs (the caller's nin) */
    int *values;             /* value index of each, in the caller's order */
    mge_tensor *t;           /* owned data */
    const mge_tensor **ptr;  /* &t[i], ready for mge_exec_run / mge_trainer_step */
    int64_t batch;           /* the value of N these inputs carry (1 when no input has N) */
    mge_binding bind;        /* every symbol's value (N = batch) */
} bench_inputs;

/* Makes tensors for inputs[0..nin) (value indices of g, in the order the
 * executor or trainer wants them). where names the model in messages.
 *
 * Every --shape must name an input of g (needed or not) and fit its template:
 * the same rank and every fixed dim equal; its dims at symbols bind them
 * (N = batch when batch > 0: --batch was given), and a symbol bound two
 * ways is an error naming both. Inputs without a --shape get their
 * template with the symbols' values (N = 1 unless bound; other symbols
 * must be bound).
 *
 * With input_file (shapes should then be empty; callers reject the mix), the
 * first nin records of the stream are used: each must have its input's dtype
 * and fit its template; the batch comes from the records (and must match
 * batch when batch > 0). Errors name the file.
 *
 * Prints errors (cli_error) and returns -1; out is then empty. */
int bench_inputs_make(const mge_graph *g, const char *where, int nin, const int *inputs, const bench_shapes *shapes,
                      int64_t batch, const char *input_file, uint64_t seed, bench_inputs *out);
void bench_inputs_free(bench_inputs *b);

#endif
