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
    int bar_drawn;
    double t_last_bar;
} tr_report;

typedef struct tr_step {
    int64_t step, total_steps, epoch, epochs, batch, batches;
    double loss, acc;        /* acc < 0: not a classification */
    double lr, samples_per_s, elapsed, eta;
} tr_step;

typedef struct tr_epoch {
    int64_t epoch, epochs, step;
    double train_loss, train_acc, val_loss, val_acc;   /* val_loss NAN: no validation; acc < 0: none */
    double seconds;
} tr_epoch;

/* log_path may be NULL; append continues a resumed run's log. Returns -1 (printed) on failure. */
int tr_report_open(tr_report *r, const char *log_path, int append, int bar, int summary);
void tr_report_step(tr_report *r, const tr_step *s);
void tr_report_epoch(tr_report *r, const tr_epoch *e);
/* Clears the bar before other messages. */
void tr_report_clear(tr_report *r);
int tr_report_close(tr_report *r);

#endif
