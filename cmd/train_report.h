/* train_report.h — mge-train's reporting: the progress bar on a terminal,
 * per-epoch summaries, and the JSONL/CSV metrics log. */
#ifndef MGE_TRAIN_REPORT_H
#define MGE_TRAIN_REPORT_H

#include <stdint.h>
#include <stdio.h>

typedef struct tr_report {
    int bar;                 /* draw a progress bar (stderr is a terminal, not -q) */
    int summary;             /* print epoch summaries */
    FILE *log;               /* NULL: no log */
    int csv;                 /* log format: CSV (else JSONL) */
    int err;                 /* errno of the first failed log write, 0 while none failed */
    int err_said;            /* the caller printed err */
    int bar_drawn;
    double t_last_bar, t_last_flush;
} tr_report;

typedef struct tr_step {
    int64_t step, total_steps, epoch, epochs, batch, batches;
    double loss, acc;        /* acc < 0: not a classification */
    double lr, samples_per_s, elapsed, eta;
} tr_step;

typedef struct tr_epoch {
    int64_t epoch, epochs, step;
    double train_loss, train_acc, val_loss, val_acc;   /* acc < 0: none */
    int has_val;             /* a validation ran: val_loss is its loss, finite or not */
    double seconds;
} tr_epoch;

/* log_path may be NULL; append continues a resumed run's log. Returns -1 (printed) on failure. */
int tr_report_open(tr_report *r, const char *log_path, int append, int bar, int summary);
/* The log is buffered and flushed at most once a second, by tr_report_flush
 * and at close. These return -1 once a log write has failed (r->err says
 * why; the caller prints it): the log stays closed to further records. */
int tr_report_step(tr_report *r, const tr_step *s);
int tr_report_epoch(tr_report *r, const tr_epoch *e);
int tr_report_flush(tr_report *r);
/* Clears the bar before other messages. */
void tr_report_clear(tr_report *r);
/* Flushes and closes the log: -1 when this or any earlier write failed. */
int tr_report_close(tr_report *r);

#endif
