/* train_loss.h — mge-train --loss: attach a loss to a model that has none
 * (an ONNX export, an inference .mge), from the command line. */
#ifndef MGE_TRAIN_LOSS_H
#define MGE_TRAIN_LOSS_H

#include "mge.h"

typedef enum { TL_NONE = 0, TL_CROSS_ENTROPY, TL_MSE } tl_kind;

/* Adds a graph input named label (a new one, or an unused input of the right
 * dtype and shape), a kind node over output (a graph output's name, its ONNX
 * name, or NULL for the first) and label, and makes it g->loss. Prints its
 * own error naming where; returns 0 or -1. */
int train_loss_attach(mge_graph *g, tl_kind kind, const char *output, const char *label, const char *where);

#endif
