/* image.c — PNG (libpng) and JPEG (libjpeg-turbo) decoding to 8-bit gray
 * or RGB, channel conversion and cropping. Both libraries report errors by
 * longjmp from a callback; those callbacks here only record the message,
 * so nothing is printed and nothing exits. */
#include "image.h"

#include <jpeglib.h>
#include <jerror.h>
#include <png.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

const char *mge_image_kind(const void *buf, size_t n)
{
    const unsigned char *p = buf;
    if (n >= 8 && memcmp(p, "\x89PNG\r\n\x1a\n", 8) == 0)
        return "PNG";
    if (n >= 3 && p[0] == 0xff && p[1] == 0xd8 && p[2] == 0xff)
        return "JPEG";
    return NULL;
}

void mge_image_free(mge_image *im)
{
    if (!im)
        return;
    free(im->px);
    memset(im, 0, sizeof *im);
}

static mge_status image_alloc(mge_image *im, int64_t w, int64_t h, int c, const char *kind, mge_error *err)
{
    memset(im, 0, sizeof *im);
    if (w <= 0 || h <= 0)
        return mge_error_set(err, MGE_ERR_FORMAT, "%s: image has no pixels (%lldx%lld)", kind, (long long)h,
                             (long long)w);
    if (w * h > MGE_IMAGE_MAX_PIXELS)
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: image of %lldx%lld pixels is larger than %lld pixels",
                             kind, (long long)h, (long long)w, (long long)MGE_IMAGE_MAX_PIXELS);
    im->px = malloc((size_t)(w * h * c));
    if (!im->px)
        return mge_error_set(err, MGE_ERR_NOMEM, "%s: cannot allocate %lld bytes", kind, (long long)(w * h * c));
    im->width = (int)w;
    im->height = (int)h;
    im->channels = c;
    return MGE_OK;
}

/* ---------------------------------------------------------------- PNG */

typedef struct png_src {
    const unsigned char *p;
    size_t n, off;
    char msg[256];
} png_src;

static void png_read_cb(png_structp png, png_bytep out, size_t len)
{
    png_src *s = png_get_io_ptr(png);
    if (len > s->n - s->off)
        png_error(png, "the file ends early (truncated)");
    memcpy(out, s->p + s->off, len);
    s->off += len;
}

static void png_error_cb(png_structp png, png_const_charp msg)
{
    png_src *s = png_get_error_ptr(png);
    snprintf(s->msg, sizeof s->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void png_warn_cb(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg; /* ancillary-chunk trouble: the pixels are still good */
}

static mge_status decode_png(const unsigned char *buf, size_t n, mge_image *im, mge_error *err)
{
    png_src src = {buf, n, 0, {0}};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_error_cb, png_warn_cb);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    /* volatile: read back after a longjmp */
    png_bytep *volatile rows = NULL;
    mge_image *volatile out = im;
    if (!png || !info) {
        png_destroy_read_struct(png ? &png : NULL, NULL, NULL);
        return mge_error_set(err, MGE_ERR_NOMEM, "PNG: out of memory");
    }
    if (setjmp(png_jmpbuf(png))) {
        free(rows);
        mge_image_free(out);
        png_destroy_read_struct(&png, &info, NULL);
        return mge_error_set(err, MGE_ERR_FORMAT, "PNG: %s", src.msg[0] ? src.msg : "corrupt image");
    }
    png_set_read_fn(png, &src, png_read_cb);
    png_read_info(png, info);
    png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    int ct = png_get_color_type(png, info);
    /* 8 bits per channel, no palette, no alpha: what PIL's convert gives */
    png_set_strip_16(png);
    png_set_packing(png);
    if (ct == PNG_COLOR_TYPE_PALETTE)
        png_set_palette_to_rgb(png);
    if (ct == PNG_COLOR_TYPE_GRAY && png_get_bit_depth(png, info) < 8)
        png_set_expand_gray_1_2_4_to_8(png);
    png_set_strip_alpha(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    int c = png_get_channels(png, info);
    if (c != 1 && c != 3)
        png_error(png, "unexpected channel count after conversion");
    mge_status s = image_alloc(im, w, h, c, "PNG", err);
    if (s) {
        png_destroy_read_struct(&png, &info, NULL);
        return s;
    }
    if (png_get_rowbytes(png, info) != (size_t)w * (size_t)c)
        png_error(png, "unexpected row size after conversion");
    rows = malloc(sizeof *rows * h);
    if (!rows)
        png_error(png, "out of memory");
    for (png_uint_32 y = 0; y < h; y++)
        rows[y] = im->px + (size_t)y * w * (size_t)c;
    png_read_image(png, rows);
    free(rows);
    png_destroy_read_struct(&png, &info, NULL);
    return MGE_OK;
}

/* ---------------------------------------------------------------- JPEG */

typedef struct jpeg_err {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX];
} jpeg_err;

static void jpeg_exit_cb(j_common_ptr ci)
{
    jpeg_err *e = (jpeg_err *)ci->err;
    (*ci->err->format_message)(ci, e->msg);
    longjmp(e->jb, 1);
}

/* Warnings are mostly harmless (extra bytes before a marker), but a file
 * that ends early would come out gray at the bottom: PIL refuses it
 * ("image file is truncated"), and so do we. */
static void jpeg_emit_cb(j_common_ptr ci, int level)
{
    if (level < 0 && ci->err->msg_code == JWRN_JPEG_EOF) {
        jpeg_err *e = (jpeg_err *)ci->err;
        snprintf(e->msg, sizeof e->msg, "the file ends early (truncated)");
        longjmp(e->jb, 1);
    }
}

static void jpeg_output_cb(j_common_ptr ci)
{
    (void)ci;
}

static mge_status decode_jpeg(const unsigned char *buf, size_t n, mge_image *im, mge_error *err)
{
    struct jpeg_decompress_struct ci;
    jpeg_err je;
    mge_image *volatile out = im;
    memset(&ci, 0, sizeof ci);
    ci.err = jpeg_std_error(&je.pub);
    je.pub.error_exit = jpeg_exit_cb;
    je.pub.emit_message = jpeg_emit_cb;
    je.pub.output_message = jpeg_output_cb;
    je.msg[0] = 0;
    if (setjmp(je.jb)) {
        mge_image_free(out);
        jpeg_destroy_decompress(&ci);
        return mge_error_set(err, MGE_ERR_FORMAT, "JPEG: %s", je.msg[0] ? je.msg : "corrupt image");
    }
    jpeg_create_decompress(&ci);
    jpeg_mem_src(&ci, buf, (unsigned long)n);
    jpeg_read_header(&ci, TRUE);
    int c;
    switch (ci.jpeg_color_space) {
    case JCS_GRAYSCALE: ci.out_color_space = JCS_GRAYSCALE; c = 1; break;
    case JCS_CMYK:
    case JCS_YCCK:
        jpeg_destroy_decompress(&ci);
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "JPEG: CMYK images are not supported (convert to RGB)");
    default: ci.out_color_space = JCS_RGB; c = 3; break;
    }
    mge_status s = image_alloc(im, ci.image_width, ci.image_height, c, "JPEG", err);
    if (s) {
        jpeg_destroy_decompress(&ci);
        return s;
    }
    jpeg_start_decompress(&ci);
    if ((int)ci.output_width != im->width || (int)ci.output_height != im->height || ci.output_components != c) {
        snprintf(je.msg, sizeof je.msg, "unexpected output geometry");
        longjmp(je.jb, 1);
    }
    while (ci.output_scanline < ci.output_height) {
        JSAMPROW row = im->px + (size_t)ci.output_scanline * (size_t)im->width * (size_t)c;
        jpeg_read_scanlines(&ci, &row, 1);
    }
    jpeg_finish_decompress(&ci);
    jpeg_destroy_decompress(&ci);
    return MGE_OK;
}

mge_status mge_image_decode(const void *buf, size_t n, mge_image *im, mge_error *err)
{
    memset(im, 0, sizeof *im);
    const char *kind = mge_image_kind(buf, n);
    if (!kind)
        return mge_error_set(err, MGE_ERR_FORMAT, "not a PNG or JPEG image");
    return kind[0] == 'P' ? decode_png(buf, n, im, err) : decode_jpeg(buf, n, im, err);
}

/* ---------------------------------------------------------------- conversions */

mge_status mge_image_channels(const mge_image *src, int channels, mge_image *dst, mge_error *err)
{
    if (channels != 1 && channels != 3)
        return mge_error_set(err, MGE_ERR_INVALID, "images have 1 or 3 channels, not %d", channels);
    mge_status s = image_alloc(dst, src->width, src->height, channels, "image", err);
    if (s)
        return s;
    size_t np = (size_t)src->width * (size_t)src->height;
    const uint8_t *p = src->px;
    uint8_t *q = dst->px;
    if (src->channels == channels) {
        memcpy(q, p, np * (size_t)channels);
    } else if (channels == 1) {
        /* PIL's L24 macro: 0.299 R + 0.587 G + 0.114 B in 16-bit fixed point */
        for (size_t i = 0; i < np; i++, p += 3)
            q[i] = (uint8_t)((p[0] * 19595u + p[1] * 38470u + p[2] * 7471u + 0x8000u) >> 16);
    } else {
        for (size_t i = 0; i < np; i++, q += 3)
            q[0] = q[1] = q[2] = p[i];
    }
    return MGE_OK;
}

mge_status mge_image_crop(const mge_image *src, int x, int y, int width, int height, mge_image *dst, mge_error *err)
{
    if (x < 0 || y < 0 || width <= 0 || height <= 0 || x > src->width - width || y > src->height - height)
        return mge_error_set(err, MGE_ERR_SHAPE, "a %dx%d crop at (%d, %d) does not fit a %dx%d image", height, width,
                             y, x, src->height, src->width);
    mge_status s = image_alloc(dst, width, height, src->channels, "image", err);
    if (s)
        return s;
    size_t c = (size_t)src->channels, rb = (size_t)width * c;
    for (int r = 0; r < height; r++)
        memcpy(dst->px + (size_t)r * rb, src->px + ((size_t)(y + r) * (size_t)src->width + (size_t)x) * c, rb);
    return MGE_OK;
}
