/* unpack.h — what the readers of compressed and archived input share
 * (formats/idx.c, dataset.c, dataset_archive.c, npz.c, mgefile_read.c):
 * how far compressed bytes may inflate, which archive members are refused,
 * and a bounded read of one member through libarchive.
 *
 * A file a user is handed must not take the machine's memory: compressed
 * input inflates to what its own headers declare and to at most
 * mge_unpack_limit(its compressed size), checked before the memory is
 * taken where the sizes are declared up front, and as the bytes arrive
 * where they are not. Deflate alone could reach 1032:1. */
#ifndef MGE_UNPACK_H
#define MGE_UNPACK_H

#include <stddef.h>
#include <stdint.h>

#include "mge.h"

#define MGE_UNPACK_RATIO 100u
#define MGE_UNPACK_FLOOR ((uint64_t)256 << 20)
/* For messages: what mge_unpack_limit allows. */
#define MGE_UNPACK_RULE "at most 100 times the compressed size, or 256 MiB if that is more"

/* max(MGE_UNPACK_FLOOR, MGE_UNPACK_RATIO * packed), saturating. */
uint64_t mge_unpack_limit(uint64_t packed);

/* NULL, or why an archive member's name is refused: an absolute path, a
 * drive or device prefix ("C:", "\\.\"), a ".." component. '\' counts as
 * a separator, as Windows archivers write it. */
const char *mge_unpack_bad_name(const char *path);

struct archive;
struct archive_entry;

/* NULL for a regular file or a directory; else what the member is ("a
 * symbolic link to 'T'", "a hard link to 'T'", "a device", "a FIFO", ...),
 * written into buf. */
const char *mge_unpack_bad_type(struct archive_entry *e, char *buf, size_t n);

typedef struct mge_unpack {
    struct archive *a;
    uint64_t packed;    /* compressed bytes of the whole input; 0: unknown (a pipe),
                         * then the bytes libarchive has read so far */
    uint64_t out;       /* member bytes read so far, all members together */
} mge_unpack;

/* Reads the current member's data into a malloc'ed *out. Fails (format
 * error, "member 'PATH': ..." with both sizes) when the member declares or
 * holds more than what is left of mge_unpack_limit(packed) for all members
 * together, or holds more than its header declares. */
mge_status mge_unpack_read(mge_unpack *u, struct archive_entry *e, const char *path, unsigned char **out,
                           size_t *n, mge_error *err);

/* gunzip of a data file (idx.c): an IDX inside inflates to the size its
 * header claims, refused up front when that is beyond mge_unpack_limit(n);
 * anything else to mge_unpack_limit(n). */
mge_status mge_gunzip_data(const void *buf, size_t n, void **out, size_t *outn, mge_error *err);

/* The archive readers, with the size of the input before an outer gzip
 * was undone (the limit is relative to it). */
mge_status mge_dataset_load_archive_packed(const void *buf, size_t n, uint64_t packed, const char *what,
                                           mge_dataset *ds, mge_error *err);
mge_status mge_npz_read_packed(const void *buf, size_t n, uint64_t packed, mge_tlist *out, mge_error *err);

#endif
