/* test_image.c — image decoding errors and the arithmetic of the pixel
 * conversions (formats/image.c, image_resize.c) on hand-computed cases;
 * tests/cli/run_image.bats compares real files against PIL itself. */
#include "image.h"
#include "unit.h"

static mge_image make(int w, int h, int c, const uint8_t *px)
{
    mge_image im = {w, h, c, malloc((size_t)(w * h * c))};
    memcpy(im.px, px, (size_t)(w * h * c));
    return im;
}

static void test_kind_and_errors(void)
{
    mge_image im;
    mge_error err;
    CHECK(mge_image_kind("\x89PNG\r\n\x1a\n", 8) && strcmp(mge_image_kind("\x89PNG\r\n\x1a\n", 8), "PNG") == 0);
    CHECK(strcmp(mge_image_kind("\xff\xd8\xff\xe0", 4), "JPEG") == 0);
    CHECK(mge_image_kind("GIF89a", 6) == NULL);
    CHECK(mge_image_decode("hello", 5, &im, &err) == MGE_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "not a PNG or JPEG"), "%s", err.msg);
    /* a signature and nothing else: truncated, not a crash */
    CHECK(mge_image_decode("\x89PNG\r\n\x1a\n", 8, &im, &err) == MGE_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "PNG: ") && strstr(err.msg, "truncated"), "%s", err.msg);
    CHECK(!im.px && im.width == 0);
    CHECK(mge_image_decode("\xff\xd8\xff\xe0\0\x10JFIF", 10, &im, &err) == MGE_ERR_FORMAT);
    CHECK_MSG(strncmp(err.msg, "JPEG: ", 6) == 0, "%s", err.msg);
    /* a PNG header claiming 2^14 x 2^14 pixels (and an empty IDAT): refused before the memory is taken */
    static const unsigned char big[] = {
        0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R',
        0, 0, 0x40, 0, 0, 0, 0x40, 0, 8, 2, 0, 0, 0, 0x26, 0xaa, 0x87, 0xd3,
        0, 0, 0, 0, 'I', 'D', 'A', 'T', 0x35, 0xaf, 0x06, 0x1e};
    CHECK(mge_image_decode(big, sizeof big, &im, &err) == MGE_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "16384x16384 pixels is larger than"), "%s", err.msg);
    CHECK(!im.px);
}

static void test_channels(void)
{
    const uint8_t rgb[] = {255, 0, 0, 0, 255, 0, 0, 0, 255, 10, 20, 30};
    mge_image a = make(4, 1, 3, rgb), g, back;
    mge_error err;
    CHECK_OK(mge_image_channels(&a, 1, &g, &err), err);
    /* PIL's L = (R*19595 + G*38470 + B*7471 + 0x8000) >> 16 */
    CHECK(g.channels == 1 && g.px[0] == 76 && g.px[1] == 150 && g.px[2] == 29 && g.px[3] == 18);
    CHECK_OK(mge_image_channels(&g, 3, &back, &err), err);
    CHECK(back.px[0] == 76 && back.px[1] == 76 && back.px[2] == 76 && back.px[11] == 18);
    mge_image_free(&back);
    CHECK(mge_image_channels(&a, 2, &back, &err) == MGE_ERR_INVALID);
    mge_image_free(&a);
    mge_image_free(&g);
}

static void test_resize(void)
{
    mge_error err;
    mge_image out;
    /* 2 -> 1 pixel: both weigh 1/2; (0 + 255) / 2 = 127.5 rounds up */
    const uint8_t two[] = {0, 255};
    mge_image a = make(2, 1, 1, two);
    CHECK_OK(mge_image_resize(&a, 1, 1, &out, &err), err);
    CHECK(out.width == 1 && out.height == 1 && out.px[0] == 128);
    mge_image_free(&out);
    /* 2 -> 4 pixels: the edge pixels see one input pixel, the middle ones two */
    CHECK_OK(mge_image_resize(&a, 4, 1, &out, &err), err);
    /* centers 0.75 and 1.25: weights 3/4, 1/4 and 1/4, 3/4 */
    CHECK(out.px[0] == 0 && out.px[3] == 255 && out.px[1] == 64 && out.px[2] == 191);
    mge_image_free(&out);
    mge_image_free(&a);
    /* a constant image stays constant at any size, both passes */
    uint8_t k[5 * 7 * 3];
    memset(k, 77, sizeof k);
    a = make(5, 7, 3, k);
    CHECK_OK(mge_image_resize(&a, 13, 2, &out, &err), err);
    int same = 1;
    for (int i = 0; i < 13 * 2 * 3; i++)
        same &= out.px[i] == 77;
    CHECK(same && out.channels == 3);
    mge_image_free(&out);
    CHECK(mge_image_resize(&a, 0, 2, &out, &err) == MGE_ERR_INVALID);
    mge_image_free(&a);
}

static void test_crop(void)
{
    const uint8_t px[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    mge_image a = make(3, 3, 1, px), out;
    mge_error err;
    CHECK_OK(mge_image_crop(&a, 1, 1, 2, 2, &out, &err), err);
    CHECK(out.px[0] == 5 && out.px[1] == 6 && out.px[2] == 8 && out.px[3] == 9);
    mge_image_free(&out);
    CHECK(mge_image_crop(&a, 2, 0, 2, 2, &out, &err) == MGE_ERR_SHAPE);
    CHECK_MSG(strstr(err.msg, "does not fit a 3x3 image"), "%s", err.msg);
    mge_image_free(&a);
}

int main(void)
{
    RUN(test_kind_and_errors);
    RUN(test_channels);
    RUN(test_resize);
    RUN(test_crop);
    return unit_done();
}
