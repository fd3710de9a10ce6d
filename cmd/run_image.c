/* run_image.c — mge-run --image: image files into an NCHW batch. */
#include "run_image.h"

#include "image.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int parse_dim(const char *s, char **end)
{
    errno = 0;
    long v = strtol(s, end, 10);
    if (*end == s || errno || v < 1 || v > 65535 || s[0] == '-' || s[0] == '+' || s[0] == ' ')
        return -1;
    return (int)v;
}

void run_image_size(const char *opt, const char *s, int allow_one, int *h, int *w)
{
    char *end;
    *h = parse_dim(s, &end);
    *w = 0;
    if (*h > 0 && *end == 'x')
        *w = parse_dim(end + 1, &end);
    if (*h < 0 || *w < 0 || *end || (!allow_one && *w == 0))
        cli_usage("%s %s: expected HxW (height x width, 1 to 65535: 224x224)%s", opt, s,
                  allow_one ? ", or one size S for the shorter side" : "");
}

int run_image_floats(const char *opt, const char *s, int positive, double *v)
{
    int n = 0;
    const char *p = s;
    for (;;) {
        char *end;
        errno = 0;
        double d = strtod(p, &end);
        if (end == p || errno || !isfinite(d) || (positive && !(d > 0)) || n == 3)
            cli_usage("%s %s: expected 1 or 3 %snumbers separated by commas (one per channel: "
                      "0.485,0.456,0.406)", opt, s, positive ? "positive " : "");
        v[n++] = d;
        if (*end == 0)
            break;
        if (*end != ',')
            cli_usage("%s %s: expected numbers separated by commas", opt, s);
        p = end + 1;
    }
    if (n == 2)
        cli_usage("%s %s: expected 1 or 3 values (one per channel), not 2", opt, s);
    return n;
}

/* The model's image input, checked. Returns 0 or -1 after printing. */
static int image_input(const run_image_opts *o, const mge_graph *g, mge_exec *e, const char *where,
                       const mge_value **out)
{
    char sv[128];
    int nin = mge_exec_ninputs(e);
    if (nin != 1) {
        cli_error(where, "--image feeds one input, and the model needs %d", nin);
        return -1;
    }
    const mge_value *v = &g->values[mge_exec_input(e, 0)];
    mge_shape_str(v->dtype, v->ndim, v->dims, sv, sizeof sv);
    if (v->ndim != 4 || (v->dims[1] != 1 && v->dims[1] != 3)) {
        cli_error(where, "--image: input '%s' is %s: images go into [N,C,H,W] (NCHW) with C 1 (gray) or 3 (RGB)",
                  v->name, sv);
        return -1;
    }
    if (v->dtype != MGE_F32 && v->dtype != MGE_U8) {
        cli_error(where, "--image: input '%s' is %s: images go into f32 (x / 255, then --mean/--std) or u8 (the "
                  "pixels)", v->name, sv);
        return -1;
    }
    if (v->dtype == MGE_U8 && (o->nmean || o->nstd)) {
        cli_error(where, "--image: input '%s' is %s: u8 pixels go in as they are, without --mean/--std", v->name, sv);
        return -1;
    }
    int c = (int)v->dims[1];
    if (o->nmean > c || o->nstd > c) {
        cli_error(where, "--mean/--std: 3 values, but input '%s' %s has 1 channel", v->name, sv);
        return -1;
    }
    *out = v;
    return 0;
}

/* One image, decoded and prepared: *im gets c channels at the final size. */
static int prepare(const run_image_opts *o, const char *file, int c, mge_image *im)
{
    mge_error err;
    mge_error_clear(&err);
    void *buf;
    size_t n;
    int mapped;
    mge_image a = {0}, b = {0};
    memset(im, 0, sizeof *im);
    if (mge_file_slurp(file, &buf, &n, &mapped, &err)) {
        cli_mge_error(file, &err);
        return -1;
    }
    mge_status s = mge_image_decode(buf, n, &a, &err);
    mge_file_unslurp(buf, n, mapped);
    if (s) {
        cli_mge_error(file, &err);
        return -1;
    }
    if ((s = mge_image_channels(&a, c, &b, &err)))
        goto fail;
    mge_image_free(&a);
    if (o->resize_h) {
        int w = o->resize_w, h = o->resize_h;
        if (!w) {
            /* torchvision's Resize(S): the shorter side becomes S, the other keeps the aspect (truncated) */
            int sh = b.width <= b.height ? b.width : b.height, lg = b.width <= b.height ? b.height : b.width;
            int nl = (int)((double)o->resize_h * lg / sh);
            w = b.width <= b.height ? o->resize_h : nl;
            h = b.width <= b.height ? nl : o->resize_h;
        }
        if ((s = mge_image_resize(&b, w, h, &a, &err)))
            goto fail;
        mge_image_free(&b);
        b = a;
        memset(&a, 0, sizeof a);
    }
    if (o->crop_h) {
        if (o->crop_h > b.height || o->crop_w > b.width) {
            cli_error(file, "--crop %dx%d: the image is %dx%d%s, smaller than the crop", o->crop_h, o->crop_w,
                      b.height, b.width, o->resize_h ? " after --resize" : "");
            mge_image_free(&b);
            return -1;
        }
        /* CenterCrop: int(round((size - crop) / 2)), Python's round (half to even) */
        int y = (int)nearbyint((b.height - o->crop_h) / 2.0), x = (int)nearbyint((b.width - o->crop_w) / 2.0);
        if ((s = mge_image_crop(&b, x, y, o->crop_w, o->crop_h, &a, &err)))
            goto fail;
        mge_image_free(&b);
        b = a;
        memset(&a, 0, sizeof a);
    }
    *im = b;
    return 0;
fail:
    cli_mge_error(file, &err);
    mge_image_free(&a);
    mge_image_free(&b);
    return -1;
}

int run_images(const run_image_opts *o, const mge_graph *g, mge_exec *e, run_sink *sink, const char *where)
{
    const mge_value *v;
    if (image_input(o, g, e, where, &v))
        return -1;
    int c = (int)v->dims[1];
    int64_t H = v->dims[2], W = v->dims[3], batch = o->batch;
    if (v->dims[0] >= 0) {
        batch = v->dims[0];   /* a model with a fixed batch takes exactly that many */
        if (o->nfiles % batch) {
            cli_error(where, "input '%s' takes batches of exactly %lld images; %d given", v->name, (long long)batch,
                      o->nfiles);
            return -1;
        }
    }
    float mean[3], std[3];
    for (int k = 0; k < 3; k++) {
        mean[k] = (float)(o->nmean ? o->mean[o->nmean == 1 ? 0 : k] : 0.0);
        std[k] = (float)(o->nstd ? o->std[o->nstd == 1 ? 0 : k] : 1.0);
    }
    mge_error err;
    mge_error_clear(&err);
    for (int first = 0; first < o->nfiles; first += (int)batch) {
        int n = o->nfiles - first < batch ? o->nfiles - first : (int)batch;
        mge_tensor t = {0};
        int h = 0, w = 0;
        for (int i = 0; i < n; i++) {
            const char *file = o->files[first + i];
            mge_image im;
            if (prepare(o, file, c, &im)) {
                mge_tensor_free(&t);
                return -1;
            }
            if ((H >= 0 && im.height != H) || (W >= 0 && im.width != W)) {
                char want[64];
                snprintf(want, sizeof want, "%lldx%lld", (long long)(H >= 0 ? H : im.height),
                         (long long)(W >= 0 ? W : im.width));
                cli_error(file, "the image is %dx%d (HxW)%s, and input '%s' takes %s: give --resize %s", im.height,
                          im.width, o->resize_h || o->crop_h ? " after --resize/--crop" : "", v->name, want, want);
                mge_image_free(&im);
                mge_tensor_free(&t);
                return -1;
            }
            if (i == 0) {
                h = im.height;
                w = im.width;
                int64_t dims[4] = {n, c, h, w};
                if (mge_tensor_alloc(&t, v->dtype, 4, dims, &err)) {
                    cli_mge_error(where, &err);
                    mge_image_free(&im);
                    return -1;
                }
            } else if (im.height != h || im.width != w) {
                cli_error(file, "the image is %dx%d (HxW), and %s before it in the batch %dx%d: the images of a "
                          "batch need one size (give --resize HxW)", im.height, im.width, o->files[first], h, w);
                mge_image_free(&im);
                mge_tensor_free(&t);
                return -1;
            }
            size_t plane = (size_t)h * (size_t)w;
            for (int ch = 0; ch < c; ch++) {
                const uint8_t *p = im.px + ch;
                size_t at = ((size_t)i * (size_t)c + (size_t)ch) * plane;
                if (v->dtype == MGE_U8) {
                    uint8_t *q = (uint8_t *)t.data + at;
                    for (size_t k = 0; k < plane; k++)
                        q[k] = p[k * (size_t)c];
                } else {
                    /* torchvision: ToTensor's div(255) then Normalize's sub and div, in f32 */
                    float *q = (float *)t.data + at;
                    for (size_t k = 0; k < plane; k++)
                        q[k] = ((float)p[k * (size_t)c] / 255.0f - mean[ch]) / std[ch];
                }
            }
            mge_image_free(&im);
        }
        const mge_tensor *argv[1] = {&t};
        if (mge_exec_run(e, argv, &err)) {
            cli_error(where, "%s: %s", o->files[first], err.msg);
            mge_tensor_free(&t);
            return -1;
        }
        mge_tensor_free(&t);
        if (run_sink_step(sink, g, e, NULL, NULL, o->files + first))
            return -1;
    }
    return 0;
}
