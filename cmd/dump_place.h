/* dump_place.h — mge-dump --device (cmd/dump_place.c). */
#ifndef MGE_DUMP_PLACE_H
#define MGE_DUMP_PLACE_H

#include <stdlib.h>

#include "mge.h"

/* Appends the placement of g on device at batch to b: comment lines of
 * the text form, or (json) a ",\"placement\":{...}" member. Prints the
 * error and returns -1 on failure. */
int dump_placement(const mge_graph *g, const char *device, const mge_binding *bind, int threads, int json, mge_buf *b,
                   const char *where);

#endif
