/* weights.h — binding an .npz of parameter values by name (mge-opt and
 * mge-train --weights). */
#ifndef MGE_CMD_WEIGHTS_H
#define MGE_CMD_WEIGHTS_H

#include "cli.h"

/* Reads path and binds its arrays to g by name. Strict by default, like
 * PyTorch's load_state_dict(strict=True): an entry that names no param,
 * state or const of g is an error, and so is (unless allow_missing) a
 * parameter left without a value. allow_unused lists such entries in a
 * warning instead and binds the rest. Returns the number of arrays bound,
 * or -1 after printing the error. */
int cli_weights_bind(mge_graph *g, const char *path, int allow_missing, int allow_unused);

#endif
