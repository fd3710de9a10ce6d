/* test_sniff.c — file kinds by their first bytes (formats/sniff.c): each
 * signature is recognised, text is not mistaken for one, and the refusals
 * say what the file is for each thing a reader wants. */
#include "mge.h"
#include "unit.h"

#define K(s) mge_sniff_kind(s, sizeof s - 1)

static void test_kinds(void)
{
    CHECK(mge_sniff_kind(NULL, 0) == MGE_KIND_EMPTY);
    CHECK(K("\x89MGE\r\n\x1a\n\1\0") == MGE_KIND_MGE);
    CHECK(K("\x93NUMPY\1\0") == MGE_KIND_NPY);
    /* zips: by the first member's name */
    CHECK(K("PK\3\4\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\5\0\0\0x.npy") == MGE_KIND_NPZ);
    CHECK(K("PK\3\4\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\13\0\0\0sd/data.pkl") == MGE_KIND_TORCH);
    CHECK(K("PK\3\4\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\10\0\0\0data.pkl") == MGE_KIND_TORCH);
    CHECK(K("PK\3\4\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\14\0\0\0xdata.pkl.no") == MGE_KIND_ZIP);
    CHECK(K("PK\5\6\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0") == MGE_KIND_NPZ);
    /* torch's legacy format pickles its magic number; other pickles are pickles */
    CHECK(K("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.") == MGE_KIND_TORCH);
    CHECK(K("\x80\x04\x95\x10\0\0\0") == MGE_KIND_PICKLE);
    CHECK(K("\x08\x07\x12\x07pytorch") == MGE_KIND_ONNX);
    CHECK(K("\x08\x08\x3a\x10") == MGE_KIND_ONNX);
    CHECK(K("\x08\x00\x12") == MGE_KIND_UNKNOWN); /* ir_version 0 is no model */
    CHECK(K("\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR") == MGE_KIND_PNG);
    CHECK(K("\xff\xd8\xff\xe0\0\x10JFIF") == MGE_KIND_JPEG);
    CHECK(K("GIF89a\1\0") == MGE_KIND_GIF);
    CHECK(K("RIFF\0\0\0\0WEBPVP8 ") == MGE_KIND_WEBP);
    CHECK(K("\x89HDF\r\n\x1a\n") == MGE_KIND_HDF5);
    CHECK(K("\x1c\0\0\0TFL3\0\0") == MGE_KIND_TFLITE);
    CHECK(K("\x40\0\0\0\0\0\0\0{\"w\":{\"dtype\":\"F32\"") == MGE_KIND_SAFETENSORS);
    CHECK(K("\0\0\x08\x03\0\0\0\1") == MGE_KIND_IDX);
    CHECK(K("\x1f\x8b\x08\0") == MGE_KIND_GZIP);
    CHECK(K("BZh91AY&SY") == MGE_KIND_BZIP2);
    CHECK(K("\xfd" "7zXZ\0\0") == MGE_KIND_XZ);
    CHECK(K("\x28\xb5\x2f\xfd") == MGE_KIND_ZSTD);
    CHECK(K("\x7f" "ELF\2\1") == MGE_KIND_ELF);
    CHECK(K("%PDF-1.7") == MGE_KIND_PDF);
    char tar[512] = "a.npy";
    memcpy(tar + 257, "ustar", 5);
    CHECK(mge_sniff_kind(tar, sizeof tar) == MGE_KIND_TAR);
    /* text models, including ones that start like a signature would */
    CHECK(K("input x : f32[N,4]\n") == MGE_KIND_UNKNOWN);
    CHECK(K("# mge text form (mge-text(5))\n") == MGE_KIND_UNKNOWN);
    CHECK(K("BZh = relu(x)\n") == MGE_KIND_UNKNOWN);
    CHECK(K("PK = relu(x)\n") == MGE_KIND_UNKNOWN);
    /* too few bytes to tell: unknown, never a read past n */
    CHECK(mge_sniff_kind("\x89PN", 3) == MGE_KIND_UNKNOWN);
    CHECK(mge_sniff_kind("PK\3\4\0", 5) == MGE_KIND_ZIP);
    for (int k = MGE_KIND_UNKNOWN; k <= MGE_KIND_PDF; k++)
        CHECK(mge_sniff_name((mge_file_kind)k)[0] != 0);
}

static void test_refusals(void)
{
    mge_error e;
    /* what each reader takes */
    CHECK(mge_sniff_refuse(MGE_KIND_MGE, MGE_SNIFF_MODEL, NULL, &e) == MGE_OK);
    CHECK(mge_sniff_refuse(MGE_KIND_UNKNOWN, MGE_SNIFF_MODEL, NULL, &e) == MGE_OK);
    CHECK(mge_sniff_refuse(MGE_KIND_NPZ, MGE_SNIFF_WEIGHTS, NULL, &e) == MGE_OK);
    CHECK(mge_sniff_refuse(MGE_KIND_ZIP, MGE_SNIFF_WEIGHTS, NULL, &e) == MGE_OK);
    CHECK(mge_sniff_refuse(MGE_KIND_TAR, MGE_SNIFF_DATA, NULL, &e) == MGE_OK);
    CHECK(mge_sniff_refuse(MGE_KIND_IDX, MGE_SNIFF_DATA, NULL, &e) == MGE_OK);
    /* and what each says about the rest */
    /* every model reader takes ONNX; given as weights, it says so and gives the recipe */
    CHECK(mge_sniff_refuse(MGE_KIND_ONNX, MGE_SNIFF_MODEL, "m.onnx", &e) == MGE_OK);
    CHECK(mge_sniff_refuse(MGE_KIND_ONNX, MGE_SNIFF_WEIGHTS, "m.onnx", &e) == MGE_ERR_UNSUPPORTED &&
          strstr(e.msg, "ONNX") && strstr(e.msg, "every mge tool reads .onnx") && strstr(e.msg, "onnx.load('m.onnx')"));
    CHECK(mge_sniff_refuse(MGE_KIND_TORCH, MGE_SNIFF_WEIGHTS, "m.pt", &e) == MGE_ERR_UNSUPPORTED &&
          strstr(e.msg, "torch.load('m.pt'") && strstr(e.msg, "v.numpy() for k, v in sd.items()"));
    CHECK(mge_sniff_refuse(MGE_KIND_TORCH, MGE_SNIFF_WEIGHTS, NULL, &e) && strstr(e.msg, "'FILE'"));
    /* a name that would break the quoted recipe is not quoted */
    CHECK(mge_sniff_refuse(MGE_KIND_TORCH, MGE_SNIFF_WEIGHTS, "it's.pt", &e) && !strstr(e.msg, "it's") &&
          strstr(e.msg, "'FILE'"));
    CHECK(mge_sniff_refuse(MGE_KIND_PNG, MGE_SNIFF_MODEL, "a.png", &e) == MGE_ERR_FORMAT &&
          strstr(e.msg, "PNG image, not a model"));
    CHECK(mge_sniff_refuse(MGE_KIND_MGE, MGE_SNIFF_WEIGHTS, "m.mge", &e) && strstr(e.msg, "--params"));
    CHECK(mge_sniff_refuse(MGE_KIND_MGE, MGE_SNIFF_DATA, "m.mge", &e) && strstr(e.msg, "not data"));
    CHECK(mge_sniff_refuse(MGE_KIND_NPY, MGE_SNIFF_MODEL, NULL, &e) && strstr(e.msg, "NPY tensor stream, not a model"));
    CHECK(mge_sniff_check("\x89PNG\r\n\x1a\n", 8, MGE_SNIFF_DATA, "a.png", &e) && strstr(e.msg, "PNG"));
    /* stdin, pipes and missing files are left to their reader */
    CHECK(mge_sniff_path("-", MGE_SNIFF_MODEL, &e) == MGE_OK);
    CHECK(mge_sniff_path("/nonexistent/x", MGE_SNIFF_MODEL, &e) == MGE_OK);
    CHECK(mge_sniff_path("/dev/null", MGE_SNIFF_WEIGHTS, &e) == MGE_OK);
}

int main(void)
{
    RUN(test_kinds);
    RUN(test_refusals);
    return unit_done();
}
