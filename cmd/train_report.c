/* train_report.c — progress bar, epoch summaries and the metrics log of mge-train. */
#include "train_report.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "cli.h"

int tr_report_open(tr_report *r, const char *log_path, int append, int bar, int summary)
{
    memset(r, 0, sizeof *r);
    r->bar = bar;
    r->summary = summary;
    r->t_last_bar = -1;
    if (!log_path)
        return 0;
    size_t n = strlen(log_path);
    if (n >= 4 && strcmp(log_path + n - 4, ".csv") == 0)
        r->csv = 1;
    else if (!(n >= 6 && strcmp(log_path + n - 6, ".jsonl") == 0) && !(n >= 5 && strcmp(log_path + n - 5, ".json") == 0))
        cli_usage("--log %s: expected a file name ending in .jsonl or .csv", log_path);
    long size = 0;
    r->log = fopen(log_path, append ? "a" : "w");
    if (!r->log) {
        cli_error(log_path, "cannot open the log: %s", strerror(errno));
        return -1;
    }
    if (append) {
        fseek(r->log, 0, SEEK_END);
        size = ftell(r->log);
    }
    if (r->csv && size <= 0)
        fprintf(r->log, "kind,epoch,step,loss,accuracy,lr,samples_per_s,seconds,val_loss,val_accuracy\n");
    return 0;
}

static void fmt_time(double s, char *b, size_t n)
{
    if (!(s >= 0) || s > 1e7) {
        snprintf(b, n, "--:--");
        return;
    }
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(b, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(b, n, "%ld:%02ld", t / 60, t % 60);
}

/* JSON numbers: non-finite values become null (JSON has no NaN). */
static void jnum(FILE *f, const char *key, double v, int last)
{
    if (isfinite(v))
        fprintf(f, "\"%s\":%.9g%s", key, v, last ? "" : ",");
    else
        fprintf(f, "\"%s\":null%s", key, last ? "" : ",");
}

/* CSV fields: empty when there is no such value, else the number (nan and
 * inf as printf spells them, which strtod and pandas read back). */
static void cnum(FILE *f, double v, int present, int last)
{
    if (present)
        fprintf(f, "%.9g", v);
    fputc(last ? '\n' : ',', f);
}

/* Records go through stdio's buffer: a failed write shows as the stream's
 * error flag, with errno from the write that failed. */
static int log_begin(tr_report *r)
{
    if (!r->log || r->err)
        return 0;
    errno = 0;
    return 1;
}

static int log_end(tr_report *r)
{
    if (r->log && !r->err && ferror(r->log))
        r->err = errno ? errno : EIO;
    return r->err ? -1 : 0;
}

int tr_report_flush(tr_report *r)
{
    if (log_begin(r) && fflush(r->log) != 0 && !r->err)
        r->err = errno ? errno : EIO;
    return log_end(r);
}

void tr_report_clear(tr_report *r)
{
    if (r->bar_drawn) {
        fprintf(stderr, "\r\033[K");
        r->bar_drawn = 0;
    }
}

int tr_report_step(tr_report *r, const tr_step *s)
{
    if (log_begin(r)) {
        if (r->csv) {
            fprintf(r->log, "step,%lld,%lld,", (long long)s->epoch, (long long)s->step);
            cnum(r->log, s->loss, 1, 0);
            cnum(r->log, s->acc, s->acc >= 0, 0);
            cnum(r->log, s->lr, 1, 0);
            cnum(r->log, s->samples_per_s, 1, 0);
            cnum(r->log, s->elapsed, 1, 0);
            fputs(",\n", r->log);
        } else {
            fprintf(r->log, "{\"kind\":\"step\",\"epoch\":%lld,\"step\":%lld,", (long long)s->epoch,
                    (long long)s->step);
            jnum(r->log, "loss", s->loss, 0);
            if (s->acc >= 0)
                jnum(r->log, "accuracy", s->acc, 0);
            jnum(r->log, "lr", s->lr, 0);
            jnum(r->log, "samples_per_s", s->samples_per_s, 0);
            jnum(r->log, "seconds", s->elapsed, 1);
            fputs("}\n", r->log);
        }
        /* a flush per step would be a write per step: once a second
         * keeps `tail -f` current */
        if (s->elapsed - r->t_last_flush >= 1.0) {
            r->t_last_flush = s->elapsed;
            if (fflush(r->log) != 0 && !r->err)
                r->err = errno ? errno : EIO;
        }
    }
    int rc = log_end(r);
    if (!r->bar)
        return rc;
    /* redraw at most 10 times a second, and always on the last step */
    if (r->t_last_bar >= 0 && s->elapsed - r->t_last_bar < 0.1 && s->step != s->total_steps)
        return rc;
    r->t_last_bar = s->elapsed;
    char eta[32], acc[32] = "";
    fmt_time(s->eta, eta, sizeof eta);
    if (s->acc >= 0)
        snprintf(acc, sizeof acc, " acc %.3f", s->acc);
    int width = 20, fill = s->batches > 0 ? (int)(width * s->batch / s->batches) : 0;
    char barbuf[32];
    for (int i = 0; i < width; i++)
        barbuf[i] = i < fill ? '=' : i == fill ? '>' : ' ';
    barbuf[width] = 0;
    fprintf(stderr, "\r\033[Kepoch %lld/%lld [%s] %lld/%lld loss %.4f%s %.0f samples/s ETA %s", (long long)s->epoch,
            (long long)s->epochs, barbuf, (long long)s->batch, (long long)s->batches, s->loss, acc, s->samples_per_s,
            eta);
    fflush(stderr);
    r->bar_drawn = 1;
    return rc;
}

int tr_report_epoch(tr_report *r, const tr_epoch *e)
{
    if (log_begin(r)) {
        if (r->csv) {
            fprintf(r->log, "epoch,%lld,%lld,", (long long)e->epoch, (long long)e->step);
            cnum(r->log, e->train_loss, 1, 0);
            cnum(r->log, e->train_acc, e->train_acc >= 0, 0);
            fputs(",,", r->log);
            cnum(r->log, e->seconds, 1, 0);
            cnum(r->log, e->val_loss, e->has_val, 0);
            cnum(r->log, e->val_acc, e->has_val && e->val_acc >= 0, 1);
        } else {
            fprintf(r->log, "{\"kind\":\"epoch\",\"epoch\":%lld,\"step\":%lld,", (long long)e->epoch,
                    (long long)e->step);
            jnum(r->log, "loss", e->train_loss, 0);
            if (e->train_acc >= 0)
                jnum(r->log, "accuracy", e->train_acc, 0);
            if (e->has_val) {
                jnum(r->log, "val_loss", e->val_loss, 0);
                if (e->val_acc >= 0)
                    jnum(r->log, "val_accuracy", e->val_acc, 0);
            }
            jnum(r->log, "seconds", e->seconds, 1);
            fputs("}\n", r->log);
        }
    }
    int rc = log_end(r);
    if (!r->summary)
        return rc;
    tr_report_clear(r);
    char tacc[32] = "", val[96] = "";
    if (e->train_acc >= 0)
        snprintf(tacc, sizeof tacc, " acc %.4f", e->train_acc);
    /* a non-finite validation loss prints as nan or inf, not as no validation */
    if (e->has_val) {
        /* NaN's sign bit depends on the kernel that made it: print one "nan" */
        double vl = isnan(e->val_loss) ? NAN : e->val_loss;
        if (e->val_acc >= 0)
            snprintf(val, sizeof val, " | val loss %.4f acc %.4f", vl, e->val_acc);
        else
            snprintf(val, sizeof val, " | val loss %.4f", vl);
    }
    fprintf(stderr, "%s: epoch %lld/%lld: train loss %.4f%s%s | %.1f s\n", cli_prog, (long long)e->epoch,
            (long long)e->epochs, e->train_loss, tacc, val, e->seconds);
    return rc;
}

int tr_report_close(tr_report *r)
{
    tr_report_clear(r);
    if (!r->log)
        return r->err ? -1 : 0;
    if (log_begin(r) && fflush(r->log) != 0 && !r->err)
        r->err = errno ? errno : EIO;
    log_end(r);
    errno = 0;
    if (fclose(r->log) != 0 && !r->err)
        r->err = errno ? errno : EIO;
    r->log = NULL;
    return r->err ? -1 : 0;
}
