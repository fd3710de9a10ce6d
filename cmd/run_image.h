/* run_image.h — mge-run --image: PNG/JPEG files as a batch for a model's
 * image input [N,C,H,W], prepared as torchvision's transforms would:
 * convert to gray (C = 1) or RGB (C = 3), Resize (bilinear, PIL's
 * arithmetic), CenterCrop, ToTensor (x / 255) and Normalize ((x - mean) / std
 * per channel). A u8 input gets the pixels as they are. */
#ifndef MGE_RUN_IMAGE_H
#define MGE_RUN_IMAGE_H

#include "cli.h"
#include "run_sink.h"

typedef struct run_image_opts {
    const char **files;
    int nfiles;
    int64_t batch;             /* images per step */
    int resize_h, resize_w;    /* 0, 0: no resize; resize_w 0: the shorter side becomes resize_h */
    int crop_h, crop_w;        /* 0, 0: no crop */
    int nmean, nstd;           /* 0, 1 or 3 values */
    double mean[3], std[3];
} run_image_opts;

/* Parses "HxW" (or a single size S with allow_one) into h, w (w = 0 for a
 * single size). A bad value is a usage error naming opt. */
void run_image_size(const char *opt, const char *s, int allow_one, int *h, int *w);
/* Parses a comma-separated list of 1 or 3 numbers; positive ones only with
 * positive. A bad value is a usage error. Returns the count. */
int run_image_floats(const char *opt, const char *s, int positive, double *v);

/* Decodes, prepares and runs the images, o->batch at a time, passing each
 * step's results (and file names) to sink. where names the model. Prints
 * and returns -1 on failure. */
int run_images(const run_image_opts *o, const mge_graph *g, mge_exec *e, run_sink *sink, const char *where);

#endif
