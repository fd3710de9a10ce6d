/* image_resize.c — bilinear resizing with PIL's arithmetic (Resample.c in
 * Pillow): per output pixel a normalized triangle filter over the input
 * pixels under it, its support scaled up when shrinking so that every input
 * pixel contributes (antialiasing), in 22-bit fixed point; the horizontal
 * pass is rounded to 8 bits before the vertical one. Matching it to the bit
 * is what lets a model trained on torchvision's Resize see the same input. */
#include "image.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PREC 22   /* PIL's PRECISION_BITS: 32 - 8 - 2 */

typedef struct taps {
    int ksize;
    int *lo, *n;     /* per output pixel: first input pixel, tap count */
    int32_t *k;      /* per output pixel: ksize fixed-point weights */
} taps;

static double triangle(double x)
{
    x = fabs(x);
    return x < 1.0 ? 1.0 - x : 0.0;
}

static void taps_free(taps *t)
{
    free(t->lo);
    free(t->n);
    free(t->k);
}

static int taps_make(int in, int out, taps *t)
{
    double scale = (double)in / out, fscale = scale < 1.0 ? 1.0 : scale;
    double support = 1.0 * fscale;   /* the triangle's support is 1 */
    t->ksize = (int)ceil(support) * 2 + 1;
    t->lo = malloc(sizeof(int) * (size_t)out);
    t->n = malloc(sizeof(int) * (size_t)out);
    t->k = calloc((size_t)out * (size_t)t->ksize, sizeof(int32_t));
    double *w = malloc(sizeof(double) * (size_t)t->ksize);
    if (!t->lo || !t->n || !t->k || !w) {
        free(w);
        taps_free(t);
        return -1;
    }
    for (int xx = 0; xx < out; xx++) {
        double center = (xx + 0.5) * scale, ss = 1.0 / fscale, ww = 0.0;
        int lo = (int)(center - support + 0.5), hi = (int)(center + support + 0.5);
        if (lo < 0)
            lo = 0;
        if (hi > in)
            hi = in;
        int n = hi - lo;
        for (int x = 0; x < n; x++) {
            w[x] = triangle((x + lo - center + 0.5) * ss);
            ww += w[x];
        }
        for (int x = 0; x < n; x++) {
            double v = ww != 0.0 ? w[x] / ww : w[x];
            t->k[(size_t)xx * (size_t)t->ksize + (size_t)x] =
                (int32_t)(v < 0 ? -0.5 + v * (1 << PREC) : 0.5 + v * (1 << PREC));
        }
        t->lo[xx] = lo;
        t->n[xx] = n;
    }
    free(w);
    return 0;
}

static uint8_t clip8(int64_t v)
{
    if (v >= ((int64_t)1 << PREC << 8))
        return 255;
    if (v <= 0)
        return 0;
    return (uint8_t)(v >> PREC);
}

/* One pass along rows (horizontal) or columns (vertical): out has the
 * other dimension of in unchanged. */
static void pass_h(const mge_image *in, mge_image *out, const taps *t)
{
    int c = in->channels;
    for (int y = 0; y < in->height; y++) {
        const uint8_t *row = in->px + (size_t)y * (size_t)in->width * (size_t)c;
        uint8_t *o = out->px + (size_t)y * (size_t)out->width * (size_t)c;
        for (int xx = 0; xx < out->width; xx++) {
            const int32_t *k = t->k + (size_t)xx * (size_t)t->ksize;
            for (int ch = 0; ch < c; ch++) {
                int64_t ss = (int64_t)1 << (PREC - 1);
                for (int x = 0; x < t->n[xx]; x++)
                    ss += (int64_t)row[(size_t)(t->lo[xx] + x) * (size_t)c + (size_t)ch] * k[x];
                o[(size_t)xx * (size_t)c + (size_t)ch] = clip8(ss);
            }
        }
    }
}

static void pass_v(const mge_image *in, mge_image *out, const taps *t)
{
    size_t rb = (size_t)in->width * (size_t)in->channels;
    for (int yy = 0; yy < out->height; yy++) {
        const int32_t *k = t->k + (size_t)yy * (size_t)t->ksize;
        uint8_t *o = out->px + (size_t)yy * rb;
        for (size_t i = 0; i < rb; i++) {
            int64_t ss = (int64_t)1 << (PREC - 1);
            for (int y = 0; y < t->n[yy]; y++)
                ss += (int64_t)in->px[(size_t)(t->lo[yy] + y) * rb + i] * k[y];
            o[i] = clip8(ss);
        }
    }
}

static mge_status alloc_like(mge_image *im, int w, int h, int c, mge_error *err)
{
    memset(im, 0, sizeof *im);
    if ((int64_t)w * h > MGE_IMAGE_MAX_PIXELS)
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "a %dx%d image is larger than %lld pixels", h, w,
                             (long long)MGE_IMAGE_MAX_PIXELS);
    im->px = malloc((size_t)w * (size_t)h * (size_t)c);
    if (!im->px)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory resizing an image");
    im->width = w;
    im->height = h;
    im->channels = c;
    return MGE_OK;
}

mge_status mge_image_resize(const mge_image *src, int width, int height, mge_image *dst, mge_error *err)
{
    memset(dst, 0, sizeof *dst);
    if (width <= 0 || height <= 0)
        return mge_error_set(err, MGE_ERR_INVALID, "cannot resize to %dx%d", height, width);
    int c = src->channels;
    mge_status s;
    if (width == src->width && height == src->height) {
        if ((s = alloc_like(dst, width, height, c, err)))
            return s;
        memcpy(dst->px, src->px, (size_t)width * (size_t)height * (size_t)c);
        return MGE_OK;
    }
    taps th = {0}, tv = {0};
    mge_image mid = {0};
    const mge_image *cur = src;
    if (width != src->width) {
        if (taps_make(src->width, width, &th))
            return mge_error_set(err, MGE_ERR_NOMEM, "out of memory resizing an image");
        s = height != src->height ? alloc_like(&mid, width, src->height, c, err) : alloc_like(dst, width, height, c, err);
        if (s) {
            taps_free(&th);
            return s;
        }
        pass_h(src, height != src->height ? &mid : dst, &th);
        taps_free(&th);
        if (height == src->height)
            return MGE_OK;
        cur = &mid;
    }
    if (taps_make(src->height, height, &tv)) {
        mge_image_free(&mid);
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory resizing an image");
    }
    if ((s = alloc_like(dst, width, height, c, err))) {
        taps_free(&tv);
        mge_image_free(&mid);
        return s;
    }
    pass_v(cur, dst, &tv);
    taps_free(&tv);
    mge_image_free(&mid);
    return MGE_OK;
}
