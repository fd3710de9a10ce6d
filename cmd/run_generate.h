/* run_generate.h — mge-run --generate N: text from a byte-level language
 * model. The model's token input ([N,S], i32 or i64) gets the context, the
 * last P tokens so far, as one [1,t] record; the logits output ([N,S,V] or
 * [B*S,V], f32, V <= 256) gives the next byte's scores at the last
 * position, sampled with a temperature and top-k (or taken greedily), and
 * the byte is printed and appended. The executor keeps one plan per
 * context length (its plan cache). */
#ifndef MGE_RUN_GENERATE_H
#define MGE_RUN_GENERATE_H

#include "cli.h"

typedef struct run_gen_opts {
    long n;                /* bytes to generate */
    const char *prompt;    /* NULL: a newline */
    double temperature;    /* > 0 */
    int top_k;             /* 0: every class */
    int greedy;            /* argmax instead of sampling */
    long context;          /* 0: from the model (see run_generate) */
    uint64_t seed;         /* sampling, and parameters without values */
    const char *output;    /* the logits value's name, or NULL: the first output */
    int threads, plan_cache;
    const char *device;
} run_gen_opts;

/* Loads model and prints the prompt and n sampled bytes to stdout. The
 * context length P: o->context, else the token input's dim 1 when it is a
 * number, else the rows of the position table (the rank-2 parameter whose
 * name has "pos" in it). Prints errors; returns the exit status (0 or 1). */
int run_generate(const char *model, const run_gen_opts *o);

#endif
