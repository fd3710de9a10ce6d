/* pass_dce.c — dead code elimination.
 *
 * Keeps the nodes the graph outputs and the loss need, every declared input
 * (they are the model's interface: removing one would shift the record order
 * mge-run expects) and the params, state and consts a kept node reads or
 * that are outputs themselves. The graph is rebuilt into a fresh one
 * (mge_pass_prune, lib/pass_util.c); tensor data and the file mapping move
 * over without copying. */
#include "internal.h"

mge_status mge_pass_dce(mge_graph **gp, int *changed, mge_error *err)
{
    *changed = 0;
    /* nothing marks anything live: keep the graph as it is */
    if ((*gp)->noutputs == 0 && (*gp)->loss < 0)
        return MGE_OK;
    return mge_pass_prune(gp, NULL, changed, err);
}
