/* sniff.c — what kind of file a few leading bytes show, and what to say
 * when a file of one kind is handed where another belongs.
 *
 * Every reader of models, weights and data asks here first, so a PNG, an
 * ONNX model or a torch.save file gets the same sentence from every tool
 * ("this looks like an ONNX model: ...") instead of whatever the parser
 * that met its first byte would have said. Only signatures are checked:
 * nothing here parses a file. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int has(const unsigned char *p, size_t n, size_t off, const char *sig, size_t len)
{
    return n >= off + len && memcmp(p + off, sig, len) == 0;
}

static uint64_t le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* A zip's first member name (a local file header at 0): torch.save writes
 * "ARCHIVE/data.pkl" first, np.savez "NAME.npy". */
static mge_file_kind zip_kind(const unsigned char *p, size_t n)
{
    if (has(p, n, 0, "PK\x05\x06", 4))
        return MGE_KIND_NPZ; /* no members: np.savez() of nothing */
    if (n < 30)
        return MGE_KIND_ZIP;
    size_t len = (size_t)p[26] | (size_t)p[27] << 8;
    if (len == 0 || n < 30 + len)
        return MGE_KIND_ZIP;
    const char *name = (const char *)p + 30;
    if (len >= 8 && memcmp(name + len - 8, "data.pkl", 8) == 0 && (len == 8 || name[len - 9] == '/'))
        return MGE_KIND_TORCH;
    if (len > 4 && memcmp(name + len - 4, ".npy", 4) == 0)
        return MGE_KIND_NPZ;
    return MGE_KIND_ZIP;
}

/* An ONNX ModelProto starts with field 1 (ir_version, a small varint: tag
 * 0x08) followed by another field of ModelProto (producer_name 0x12,
 * producer_version 0x1a, domain 0x22, model_version 0x28, doc_string 0x32,
 * graph 0x3a, opset_import 0x42). No text form starts with a backspace. */
static int onnx_like(const unsigned char *p, size_t n)
{
    if (n < 3 || p[0] != 0x08 || p[1] == 0 || p[1] >= 0x80)
        return 0;
    switch (p[2]) {
    case 0x12: case 0x1a: case 0x22: case 0x28: case 0x32: case 0x3a: case 0x42: return 1;
    default: return 0;
    }
}

mge_file_kind mge_sniff_kind(const void *head, size_t n)
{
    const unsigned char *p = head;
    if (!p || n == 0)
        return MGE_KIND_EMPTY;
    if (mge_file_is_mge(p, n))
        return MGE_KIND_MGE;
    if (has(p, n, 0, "\x93NUMPY", 6))
        return MGE_KIND_NPY;
    if (has(p, n, 0, "PK\x03\x04", 4) || has(p, n, 0, "PK\x05\x06", 4))
        return zip_kind(p, n);
    /* pickle protocol 2..5; torch's legacy format pickles its magic number first */
    if (n >= 2 && p[0] == 0x80 && p[1] >= 2 && p[1] <= 5)
        return has(p, n, 2, "\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19", 12) ? MGE_KIND_TORCH
                                                                                     : MGE_KIND_PICKLE;
    if (onnx_like(p, n))
        return MGE_KIND_ONNX;
    if (has(p, n, 0, "\x89PNG\r\n\x1a\n", 8))
        return MGE_KIND_PNG;
    if (has(p, n, 0, "\xff\xd8\xff", 3))
        return MGE_KIND_JPEG;
    if (has(p, n, 0, "GIF87a", 6) || has(p, n, 0, "GIF89a", 6))
        return MGE_KIND_GIF;
    if (has(p, n, 0, "RIFF", 4) && has(p, n, 8, "WEBP", 4))
        return MGE_KIND_WEBP;
    if (has(p, n, 0, "\x89HDF\r\n\x1a\n", 8))
        return MGE_KIND_HDF5;
    if (has(p, n, 4, "TFL3", 4))
        return MGE_KIND_TFLITE;
    /* safetensors: a little-endian u64 header length, then the JSON header */
    if (n >= 10 && p[8] == '{' && (p[9] == '"' || p[9] == '}') && le64(p) >= 2 && le64(p) < ((uint64_t)1 << 32))
        return MGE_KIND_SAFETENSORS;
    if (mge_idx_is_idx(p, n))
        return MGE_KIND_IDX;
    if (n >= 2 && p[0] == 0x1f && p[1] == 0x8b)
        return MGE_KIND_GZIP;
    if (has(p, n, 0, "BZh", 3) && n >= 10 && p[3] >= '1' && p[3] <= '9' && has(p, n, 4, "1AY&SY", 6))
        return MGE_KIND_BZIP2;
    if (has(p, n, 0, "\xfd" "7zXZ\0", 6))
        return MGE_KIND_XZ;
    if (has(p, n, 0, "\x28\xb5\x2f\xfd", 4))
        return MGE_KIND_ZSTD;
    if (has(p, n, 257, "ustar", 5))
        return MGE_KIND_TAR;
    if (has(p, n, 0, "\x7f" "ELF", 4))
        return MGE_KIND_ELF;
    if (has(p, n, 0, "%PDF-", 5))
        return MGE_KIND_PDF;
    return MGE_KIND_UNKNOWN;
}

const char *mge_sniff_name(mge_file_kind k)
{
    switch (k) {
    case MGE_KIND_EMPTY: return "an empty file";
    case MGE_KIND_MGE: return "an mge model (.mge)";
    case MGE_KIND_NPY: return "an NPY tensor stream";
    case MGE_KIND_NPZ: return "an .npz archive";
    case MGE_KIND_ZIP: return "a zip archive";
    case MGE_KIND_TORCH: return "a PyTorch file (torch.save)";
    case MGE_KIND_PICKLE: return "a Python pickle";
    case MGE_KIND_ONNX: return "an ONNX model";
    case MGE_KIND_SAFETENSORS: return "a safetensors file";
    case MGE_KIND_HDF5: return "an HDF5 file (a Keras .h5 model?)";
    case MGE_KIND_TFLITE: return "a TensorFlow Lite model";
    case MGE_KIND_IDX: return "an IDX array (MNIST-style data)";
    case MGE_KIND_GZIP: return "gzip-compressed data";
    case MGE_KIND_BZIP2: return "bzip2-compressed data";
    case MGE_KIND_XZ: return "xz-compressed data";
    case MGE_KIND_ZSTD: return "zstd-compressed data";
    case MGE_KIND_TAR: return "a tar archive";
    case MGE_KIND_PNG: return "a PNG image";
    case MGE_KIND_JPEG: return "a JPEG image";
    case MGE_KIND_GIF: return "a GIF image";
    case MGE_KIND_WEBP: return "a WebP image";
    case MGE_KIND_ELF: return "an executable (ELF)";
    case MGE_KIND_PDF: return "a PDF document";
    case MGE_KIND_UNKNOWN: break;
    }
    return "text or an unknown kind of file";
}

/* The export recipes the messages quote ('FILE' is the file at fault). */
#define TORCH_TO_NPZ "python3 -c \"import torch, numpy as np; sd = torch.load('%s', map_location='cpu'); " \
                     "np.savez('w.npz', **{k: v.numpy() for k, v in sd.items()})\""
#define ONNX_TO_NPZ "python3 -c \"import onnx, numpy as np; from onnx.numpy_helper import to_array; " \
                    "np.savez('w.npz', **{t.name: to_array(t) for t in onnx.load('%s').graph.initializer})\""
#define ST_TO_NPZ "python3 -c \"import numpy as np; from safetensors.numpy import load_file; " \
                  "np.savez('w.npz', **load_file('%s'))\""
#define TEXT_THEN_BIND "write the network in the text form (mge-text(5)) and bind the weights by name: " \
                       "mge-opt NET.mgt --weights w.npz -o NET.mge"

static int is_image(mge_file_kind k)
{
    return k == MGE_KIND_PNG || k == MGE_KIND_JPEG || k == MGE_KIND_GIF || k == MGE_KIND_WEBP;
}

static int is_compressed(mge_file_kind k)
{
    return k == MGE_KIND_GZIP || k == MGE_KIND_BZIP2 || k == MGE_KIND_XZ || k == MGE_KIND_ZSTD;
}

static mge_status refuse_model(mge_file_kind k, const char *f, mge_error *err)
{
    const char *what = mge_sniff_name(k);
    switch (k) {
    case MGE_KIND_UNKNOWN: case MGE_KIND_EMPTY: case MGE_KIND_MGE: return MGE_OK;
    case MGE_KIND_NPY:
        return mge_error_set(err, MGE_ERR_FORMAT, "this is an NPY tensor stream, not a model "
                             "(mge-run reads it as the model's input, mge-dump shows it)");
    case MGE_KIND_NPZ:
        return mge_error_set(err, MGE_ERR_FORMAT, "this is an .npz archive, not a model: bind it to a model as its "
                             "weights (mge-opt NET.mgt --weights %s), or train on it (mge-train --data)", f);
    case MGE_KIND_TORCH: case MGE_KIND_PICKLE:
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "this is %s, not a model: mge reads no pickles; "
                             "save the weights with numpy, " TORCH_TO_NPZ ", then " TEXT_THEN_BIND, what, f);
    case MGE_KIND_ONNX:
        return MGE_OK; /* every model reader takes ONNX (formats/onnx_read.c) */
    case MGE_KIND_SAFETENSORS:
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "this looks like a safetensors file (weights, not a model): "
                             "save them as .npz, " ST_TO_NPZ ", then " TEXT_THEN_BIND, f);
    case MGE_KIND_HDF5: case MGE_KIND_TFLITE:
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "this is %s, which mge cannot read: " TEXT_THEN_BIND
                             " (an .npz of the weights by name)", what);
    case MGE_KIND_IDX: case MGE_KIND_ZIP: case MGE_KIND_TAR:
        return mge_error_set(err, MGE_ERR_FORMAT, "this is %s, not a model (data goes to mge-train --data or "
                             "mge-run --data)", what);
    default: break;
    }
    if (is_image(k))
        return mge_error_set(err, MGE_ERR_FORMAT, "this is %s, not a model (images are a model's input: "
                             "convert them to NPY records, e.g. with numpy and PIL, "
                             "np.save('x.npy', np.asarray(Image.open('%s'), np.float32)[None]))", what, f);
    if (is_compressed(k))
        return mge_error_set(err, MGE_ERR_FORMAT, "this is %s, not a model (decompress it first)", what);
    return mge_error_set(err, MGE_ERR_FORMAT, "this is %s, not a model", what);
}

static mge_status refuse_weights(mge_file_kind k, const char *f, mge_error *err)
{
    const char *what = mge_sniff_name(k);
    switch (k) {
    /* zips are the npz reader's to judge: it names the member that is not an array */
    case MGE_KIND_NPZ: case MGE_KIND_ZIP: case MGE_KIND_EMPTY: return MGE_OK;
    case MGE_KIND_MGE:
        return mge_error_set(err, MGE_ERR_FORMAT, "this is an mge model, not an .npz of weights: export its "
                             "weights with mge-dump %s --params w.npz (or use the model itself)", f);
    case MGE_KIND_NPY:
        return mge_error_set(err, MGE_ERR_FORMAT, "this is an NPY tensor stream, not an .npz of weights by name: "
                             "save them with np.savez('w.npz', **{name: array, ...})");
    case MGE_KIND_TORCH: case MGE_KIND_PICKLE:
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "this is %s, not an .npz: mge reads no pickles; save the "
                             "state_dict with numpy instead: " TORCH_TO_NPZ, what, f);
    case MGE_KIND_ONNX:
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "this looks like an ONNX model, not an .npz: use the model "
                             "itself (every mge tool reads .onnx), or save its weights with numpy: " ONNX_TO_NPZ, f);
    case MGE_KIND_SAFETENSORS:
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "this looks like a safetensors file, not an .npz: "
                             "convert it with numpy: " ST_TO_NPZ, f);
    case MGE_KIND_UNKNOWN:
        return mge_error_set(err, MGE_ERR_FORMAT, "this is not an .npz archive (weights are a zip of NAME.npy "
                             "arrays, as np.savez writes)");
    default: break;
    }
    return mge_error_set(err, MGE_ERR_FORMAT, "this is %s, not an .npz of weights (np.savez writes one)", what);
}

static mge_status refuse_data(mge_file_kind k, const char *f, mge_error *err)
{
    const char *what = mge_sniff_name(k);
    switch (k) {
    /* what the dataset loader reads (tar and zip through libarchive's filters) */
    case MGE_KIND_UNKNOWN: case MGE_KIND_EMPTY: case MGE_KIND_NPY: case MGE_KIND_NPZ: case MGE_KIND_ZIP:
    case MGE_KIND_IDX: case MGE_KIND_TAR: case MGE_KIND_GZIP: case MGE_KIND_BZIP2: case MGE_KIND_XZ:
    case MGE_KIND_ZSTD:
        return MGE_OK;
    case MGE_KIND_MGE:
        return mge_error_set(err, MGE_ERR_FORMAT, "this is an mge model, not data (the model is the tool's "
                             "argument; data is NPY, .npz, IDX, or a tar/zip of NPY files)");
    case MGE_KIND_TORCH: case MGE_KIND_PICKLE:
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "this is %s, not data mge reads: save the tensors with "
                             "numpy instead, np.save or np.savez('d.npz', x=..., label=...)", what);
    default: break;
    }
    if (is_image(k))
        return mge_error_set(err, MGE_ERR_FORMAT, "this is %s, not NPY data: convert images with numpy and PIL, "
                             "e.g. np.save('x.npy', np.asarray(Image.open('%s'), np.float32)[None])", what, f);
    return mge_error_set(err, MGE_ERR_FORMAT, "this is %s, not data (NPY, .npz, IDX, or a tar/zip of NPY files)",
                         what);
}

mge_status mge_sniff_refuse(mge_file_kind k, mge_sniff_want want, const char *name, mge_error *err)
{
    /* quoted inside the recipes: a path with a quote would break them */
    const char *f = name && strcmp(name, "-") != 0 && !strpbrk(name, "'\"\\") ? name : "FILE";
    switch (want) {
    case MGE_SNIFF_MODEL: return refuse_model(k, f, err);
    case MGE_SNIFF_WEIGHTS: return refuse_weights(k, f, err);
    case MGE_SNIFF_DATA: return refuse_data(k, f, err);
    }
    return MGE_OK;
}

mge_status mge_sniff_check(const void *head, size_t n, mge_sniff_want want, const char *name, mge_error *err)
{
    return mge_sniff_refuse(mge_sniff_kind(head, n), want, name, err);
}

mge_status mge_sniff_path(const char *path, mge_sniff_want want, mge_error *err)
{
    if (!path || strcmp(path, "-") == 0)
        return MGE_OK;
    /* regular files only: reading the head of a pipe would consume it */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return MGE_OK; /* the reader reports it */
    struct stat st;
    unsigned char head[MGE_SNIFF_BYTES];
    ssize_t k = 0;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        do
            k = read(fd, head, sizeof head);
        while (k < 0 && errno == EINTR);
    }
    close(fd);
    if (k <= 0)
        return MGE_OK;
    return mge_sniff_check(head, (size_t)k, want, path, err);
}
