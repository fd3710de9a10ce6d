/* mge_dataset.h — datasets and batch loading (part of the public API; included by mge.h).
 *
 * A dataset is a set of arrays with the same leading dimension (the sample
 * count), held in memory. The life of one in mge-train:
 *
 *     mge_dataset ds;
 *     mge_dataset_load("fashion-mnist", &ds, &err);        any source below
 *     mge_dataset_bind(&ds, g, nin, inputs, &opts, &err);   one array per model input
 *     mge_dataset_split(&ds, 0.1, seed, &val, &err);       optional validation split
 *     mge_loader_create(&ds, 64, 1, 0, seed, 1, &l, &err);
 *     for each epoch e: mge_loader_start(l, e, 0, &err);
 *                       while (mge_loader_next(l, &batch, &err) == MGE_OK) step(batch);
 *     mge_loader_free(l); mge_dataset_free(&ds);
 */
#ifndef MGE_DATASET_H
#define MGE_DATASET_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- datasets */

typedef struct mge_dataset {
    int n;              /* arrays */
    char **names;       /* per array: its name, or NULL when the source has no names (positional) */
    mge_tensor *t;      /* per array: [count, ...], owned */
    int64_t count;      /* samples; -1 for an unbound tensor stream (see stream) */
    char *source;       /* what was loaded, for messages: "fashion-mnist train", "DIR train", "d.npz",
                         * "<stdin>"; no count (it changes with bind and split): a tool prints
                         * "%s: %lld samples" with count */
    int positional;     /* bind by position, not by name: IDX pairs ("images", "labels" are
                         * descriptive only), single IDX files, tensor streams */
    int stream;         /* the arrays are the records of a tensor stream in load order, not yet
                         * grouped: record i belongs to input i % nin (bind concatenates) */
} mge_dataset;

/* Loads a dataset. spec is one of:
 *
 *   fashion-mnist[:train|:test]
 *       /usr/share/datasets/fashion-mnist (Debian package dataset-fashion-mnist);
 *       train is the default, test is the t10k pair. Arrays "images" u8[n,28,28]
 *       and "labels" u8[n], bound by position (images -> first input).
 *   DIR[:train|:test]
 *       a directory holding IDX pairs PREFIX-images-idxK-ubyte[.gz] and
 *       PREFIX-labels-idxK-ubyte[.gz]. With one pair, that pair; with several,
 *       the train- pair (or, with :test, the t10k- or test- pair); otherwise an
 *       error lists the pairs found.
 *   PREFIX[:test]
 *       PREFIX-images-idx3-ubyte[.gz] + PREFIX-labels-idx1-ubyte[.gz]
 *       (dir/train -> dir/train-images-idx3-ubyte.gz, ...); with :test and a
 *       last component of "train", the t10k- pair next to it.
 *   FILE or "-" (stdin), recognised by content (gzip is undone first):
 *       IDX        one array, positional;
 *       NPY        a tensor stream: records back to back, stored in load order
 *                  (positional, stream = 1, count = -1 until bind groups them);
 *       .npz       (a zip whose name ends in .npz) arrays by name;
 *       tar, zip   (also .tar.gz, and what libarchive's filters undo: bz2, xz):
 *                  member NAME.npy is array NAME; members DIR/ANY.npy are shards
 *                  of array DIR (DIR may itself contain '/'), concatenated along
 *                  axis 0 in sorted member-name order. Members that are not
 *                  .npy are errors, except directories and hidden files (".x",
 *                  "__MACOSX/"). A name given both ways is an error.
 *
 * Errors name the file: missing file, unknown format, arrays with different
 * sample counts (except unbound streams), an empty dataset (0 samples, or
 * no arrays), unsupported dtypes (f64 NPY: save float32). IDX i16 is widened
 * to i32 and f64 narrowed to f32. On failure ds is zeroed. */
mge_status mge_dataset_load(const char *spec, mge_dataset *ds, mge_error *err);
void mge_dataset_free(mge_dataset *ds);   /* zeroes ds; safe on a zeroed ds */

typedef struct mge_data_opts {
    int normalize;          /* apply mean/std below to float-converted u8 data */
    float mean, std;        /* e.g. 0.2860, 0.3530 for Fashion-MNIST */
} mge_data_opts;

/* Makes ds hold exactly one array per model input, in the order inputs[0..nin),
 * each converted to that input's dtype and per-sample shape (the graph value's
 * template shape with the batch dim MGE_DIM_N at position 0); names become the
 * input names. o may be NULL (no normalization).
 *
 * Matching: a named dataset binds by name; every input must have an array
 * of its exact name (else an error lists the missing inputs and the arrays
 * there are). Arrays that no input asks for are dropped: each input still
 * gets the array of its own name, so nothing trains on the wrong data, and
 * a tool may bind a subset of a model's inputs (inference without labels).
 * A positional dataset (IDX) binds array i -> input i; it needs at least
 * nin arrays and drops the rest (images, labels -> x alone). An unbound
 * stream must have a multiple of nin records: record i -> input i % nin,
 * the records of one input concatenated along axis 0.
 *
 * Conversions: u8 -> float input: x / 255, then (x - mean) / std when
 * o->normalize. Other integers (i8, i32, i64, bool) -> float: the value.
 * Float -> float: the value (f32, f16, bf16). Integer -> integer: the value,
 * which must fit (an error names the first that does not). Float -> integer
 * and quantized dtypes are errors. The per-sample shape may differ from the
 * input's only by size-1 dims ([n,28,28] fits [N,1,28,28]).
 * Sample count 0 is the error "empty dataset". On failure ds is unchanged. */
mge_status mge_dataset_bind(mge_dataset *ds, const mge_graph *g, int nin, const int *inputs,
                            const mge_data_opts *o, mge_error *err);

/* Moves a fraction frac (0 < frac < 1) of the samples, chosen by a shuffle
 * seeded by seed, into val (a new dataset with the same names and kind). Both
 * parts keep the original order of their samples. Each part gets at least one
 * sample (round(frac * count), clamped), else MGE_ERR_INVALID. Not for
 * unbound streams. On failure ds is unchanged and val zeroed. */
mge_status mge_dataset_split(mge_dataset *ds, double frac, uint64_t seed, mge_dataset *val, mge_error *err);

/* Smallest and largest value of integer array i (the labels' class range).
 * MGE_ERR_INVALID for a float array, an index out of range or no elements. */
mge_status mge_dataset_label_range(const mge_dataset *ds, int i, int64_t *min, int64_t *max);

/* ---------------------------------------------------------------- loader */

typedef struct mge_loader mge_loader;

/* Batches over a bound dataset, which must outlive the loader and not change.
 * shuffle: a permutation per epoch derived only from (seed, epoch)
 * (Fisher-Yates with mge_rng seeded from a mix of seed and epoch), so
 * resuming at (epoch, batch) reproduces the same order; without shuffle the
 * samples come in order. drop_last drops a final partial batch (then a
 * dataset smaller than one batch is an error). prefetch: gather the next
 * batch on a background thread while the caller uses the current one; the
 * batches are the same bytes either way. */
mge_status mge_loader_create(const mge_dataset *ds, int64_t batch, int shuffle, int drop_last, uint64_t seed,
                             int prefetch, mge_loader **out, mge_error *err);
int64_t mge_loader_batches(const mge_loader *l);          /* batches per epoch */
/* Begins epoch `epoch` (>= 0) at batch index first_batch (0 <= first_batch <=
 * batches; == batches means the epoch is already over). A next() without a
 * start begins epoch 0 at batch 0. */
mge_status mge_loader_start(mge_loader *l, int64_t epoch, int64_t first_batch, mge_error *err);
/* The next batch of the current epoch: (*batch)[i] for array i, dims[0] the
 * rows in this batch (the last may be short), valid until the next call to
 * next, start or free. MGE_ERR_EOF at the end of the epoch (and after). */
mge_status mge_loader_next(mge_loader *l, const mge_tensor *const **batch, mge_error *err);
void mge_loader_free(mge_loader *l);                      /* joins the thread; NULL is fine */

/* ---------------------------------------------------------------- readers the loader uses */

/* An IDX file in buf[0..n): raw, or gzip (recognised by its magic). Big-endian
 * data is converted to native order; i16 becomes i32, f64 becomes f32. Every
 * length is checked against n: truncation, trailing bytes, ndim 0, dims whose
 * product overflows are MGE_ERR_FORMAT. t is overwritten (owned). */
mge_status mge_idx_read_mem(const void *buf, size_t n, mge_tensor *t, mge_error *err);
/* The same from a file ("-" = stdin); messages start with the path. */
mge_status mge_idx_read_path(const char *path, mge_tensor *t, mge_error *err);
int mge_idx_is_idx(const void *buf, size_t n);   /* magic: 0, 0, a known dtype, ndim >= 1 */
/* Decompresses gzip (one or more members) in buf[0..n) into a malloc'ed
 * *out of *outn bytes; fails beyond limit bytes of output (0 = no limit). */
mge_status mge_gunzip_mem(const void *buf, size_t n, size_t limit, void **out, size_t *outn, mge_error *err);
int mge_is_gzip(const void *buf, size_t n);

/* Checks that a hand-built or freshly read dataset is consistent and sets
 * ds->count: every array has a leading (sample) dimension of the same size,
 * which is not 0 ("empty dataset"). Streams (ds->stream) only need >= 1
 * record; their count stays -1. Messages start with what. */
mge_status mge_dataset_check(mge_dataset *ds, const char *what, mge_error *err);

/* tar or zip (any libarchive filter) of NPY members, as mge_dataset_load
 * describes, from buf[0..n); what names the source in messages. */
mge_status mge_dataset_load_archive_mem(const void *buf, size_t n, const char *what, mge_dataset *ds,
                                        mge_error *err);

#ifdef __cplusplus
}
#endif

#endif
