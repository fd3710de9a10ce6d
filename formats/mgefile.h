/* mgefile.h — constants of the .mge container shared by its writer and
 * reader (formats/mgefile_write.c, formats/mgefile_read.c). The byte layout
 * is specified in man/man5/mge-format.5; keep the two in step. */
#ifndef MGE_MGEFILE_H
#define MGE_MGEFILE_H

#include "internal.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the .mge reader and writer store tensor data in host order and assume a little-endian host"
#endif

#define MGEF_SIG "\x89MGE\r\n\x1a\n"
#define MGEF_SIG_LEN 8
#define MGEF_HEADER_LEN 36      /* signature, version, flags, data offset, file size, crc */
#define MGEF_ALIGN 64           /* tensor data alignment from the file start */
#define MGEF_SECTION_OVERHEAD 16 /* tag (4) + payload length (8) + crc (4) */

/* Section tags: four ASCII bytes, in this order in every file. */
#define MGEF_TAG_META "META"
#define MGEF_TAG_GRAPH "GRPH"
#define MGEF_TAG_TDIR "TDIR"

/* Metadata value types. */
#define MGEF_META_TEXT 0
#define MGEF_META_INT 1

/* A node output's dim that is an expression over symbols (version 2):
 * the reader checks the inferred dim is symbolic. */
#define MGEF_DIM_EXPR INT64_MIN

/* Value record flags. */
#define MGEF_VAL_HAS_DATA 1u

/* Tensor compression. */
#define MGEF_COMP_NONE 0
#define MGEF_COMP_ZLIB 1

/* Deflate cannot expand data by more than this factor (a 258-byte match in 2 bits). */
#define MGEF_MAX_ZLIB_RATIO 1032u

#define MGEF_MAX_NODE_ATTRS 16
#define MGEF_MAX_NODE_OUTS 4


/* zlib's CRC-32 of p[0..n), fed in pieces (crc32 takes uInt lengths). */
uint32_t mge_file_crc32(const void *p, size_t n);

#endif
