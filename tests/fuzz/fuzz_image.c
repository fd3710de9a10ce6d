/* fuzz_image.c — libFuzzer target for the PNG and JPEG decoders and the
 * conversions after them: whatever decodes must have a sane geometry,
 * survive gray/RGB conversion, a resize and a crop. */
#include "image.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mge_image im, c, r, k;
    mge_error err;
    if (mge_image_decode(data, size, &im, &err) != MGE_OK) {
        if (im.px || im.width)
            abort(); /* a failed decode leaves nothing behind */
        return 0;
    }
    if (im.width <= 0 || im.height <= 0 || (im.channels != 1 && im.channels != 3) ||
        (int64_t)im.width * im.height > MGE_IMAGE_MAX_PIXELS)
        abort();
    /* bounded work per input: conversions only on small images */
    if ((int64_t)im.width * im.height <= 1 << 16) {
        if (mge_image_channels(&im, 4 - im.channels, &c, &err) != MGE_OK)
            abort();
        if (mge_image_resize(&c, 1 + im.height % 17, 1 + im.width % 13, &r, &err) != MGE_OK)
            abort();
        if (mge_image_crop(&r, 0, 0, r.width, r.height, &k, &err) != MGE_OK)
            abort();
        mge_image_free(&c);
        mge_image_free(&r);
        mge_image_free(&k);
    }
    mge_image_free(&im);
    return 0;
}
