/* image.h — PNG and JPEG images as 8-bit pixels (libpng, libjpeg-turbo),
 * and the conversions a model's input needs: gray <-> RGB and resizing, with
 * the arithmetic of PIL (which torchvision's transforms use on images), so
 * that a model fed by mge sees the numbers it saw in PyTorch.
 *
 * Readers never print: a bad file is an mge_error ("PNG: ...", "JPEG: ..."). */
#ifndef MGE_IMAGE_H
#define MGE_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "mge.h"

/* A decoded image larger than this is refused before its memory is taken
 * (a 100-byte PNG may claim 2^31 x 2^31 pixels). */
#define MGE_IMAGE_MAX_PIXELS ((int64_t)1 << 27)

typedef struct mge_image {
    int width, height;
    int channels;       /* 1 (gray) or 3 (RGB) */
    uint8_t *px;        /* height rows of width * channels bytes (HWC), malloc'ed */
} mge_image;

/* "PNG" or "JPEG" when buf starts like one, else NULL. */
const char *mge_image_kind(const void *buf, size_t n);

/* Decodes a PNG or JPEG in buf[0..n) into im (overwritten; on failure
 * zeroed). Gray stays 1 channel (palette, 16-bit and sub-byte pixels are
 * expanded to 8 bits, 16-bit by their high byte), colour becomes RGB, alpha
 * is dropped (as PIL's convert("RGB")). Truncated or corrupt data,
 * CMYK JPEGs and images over MGE_IMAGE_MAX_PIXELS are errors. */
mge_status mge_image_decode(const void *buf, size_t n, mge_image *im, mge_error *err);

/* dst = src with `channels` channels (1 or 3): RGB -> gray is ITU-R 601-2
 * luma in PIL's fixed point (convert("L")), gray -> RGB repeats the value.
 * dst is overwritten; src == dst is not allowed. */
mge_status mge_image_channels(const mge_image *src, int channels, mge_image *dst, mge_error *err);

/* dst = src resized to width x height with PIL's bilinear filter
 * (Image.resize(..., BILINEAR), torchvision's default): a triangle filter
 * whose support widens with the scale when shrinking (antialiased), applied
 * horizontally then vertically in 22-bit fixed point, rounded to 8 bits
 * after each pass. The same size is a copy. */
mge_status mge_image_resize(const mge_image *src, int width, int height, mge_image *dst, mge_error *err);

/* dst = the width x height rectangle of src at (x, y), which must lie inside. */
mge_status mge_image_crop(const mge_image *src, int x, int y, int width, int height, mge_image *dst,
                          mge_error *err);

void mge_image_free(mge_image *im);   /* zeroes im; safe on a zeroed one */

#endif
