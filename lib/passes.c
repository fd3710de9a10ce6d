/* passes.c — the pass registry, -O presets and the pass runner.
 *
 * Adding a pass: write lib/pass_<id>.c defining
 *   mge_status mge_pass_<id>(mge_graph **g, int *changed, mge_error *err);
 * and add one MGE_PASS line below (and to a preset if it belongs there). */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* MGE_PASS(id, name, summary): lib/pass_<id>.c defines mge_pass_<id>; name is what users type (--passes=name). */
#define MGE_PASSES(MGE_PASS) \
    MGE_PASS(dce, "dce", "remove nodes and values that no output or loss needs") \
    MGE_PASS(cse, "cse", "merge nodes that compute the same op on the same inputs with the same attributes") \
    MGE_PASS(fold_constants, "fold-constants", "compute once every subgraph that depends only on params and consts") \
    MGE_PASS(strip_training, "strip-training", "drop the loss and label inputs; dropout becomes identity, batchnorm inference") \
    MGE_PASS(fold_bn, "fold-bn", "fold batchnorm after conv2d/linear into the weights and bias") \
    MGE_PASS(fold_scale, "fold-scale", "fold multiplication/addition by constants into the preceding conv2d/linear") \
    MGE_PASS(f16_weights, "f16-weights", "store float weights as f16, computed in f32") \
    MGE_PASS(bf16_weights, "bf16-weights", "store float weights as bf16, computed in f32") \
    MGE_PASS(bf16, "bf16", "compute dense convolutions, linear, matmul and attention in bf16 (f32 sums) where this CPU has AMX or AVX512-BF16") \
    MGE_PASS(fuse_activation, "fuse-activation", "fuse conv2d/linear with a following residual add and activation into one node") \
    MGE_PASS(fuse_elemwise, "fuse-elemwise", "fuse chains of f32 elementwise ops into one fused_elemwise node (inference graphs)") \
    MGE_PASS(winograd, "winograd", "3x3 stride-1 conv2d/fused_conv2d to Winograd F(4,3)/F(2,3), weights transformed at load") \
    MGE_PASS(layout, "layout", "run conv regions in the CPU's blocked layout NCHWc, with as few transposes as possible") \
    MGE_PASS(unfuse, "unfuse", "undo fuse-activation, fuse-elemwise, winograd and layout: plain NCHW ops, every intermediate named")

#define MGE_PASS_DECL(id, name, summary) mge_status mge_pass_##id(mge_graph **g, int *changed, mge_error *err);
MGE_PASSES(MGE_PASS_DECL)
#undef MGE_PASS_DECL

static const mge_pass registry[] = {
#define MGE_PASS_ENTRY(id, name, summary) {name, summary, mge_pass_##id},
    MGE_PASSES(MGE_PASS_ENTRY)
#undef MGE_PASS_ENTRY
};

#define NPASSES ((int)(sizeof registry / sizeof registry[0]))

/* -O0 .. -O3. Later levels are supersets of earlier ones. In -O2 the
 * folds run first (they match plain conv2d/linear), then fuse-activation
 * (layout and winograd carry a fused epilogue over), then layout (on
 * AVX-512 it takes the convolutions into NCHW16c), then winograd (the 3x3
 * convs still in NCHW: all of them without AVX-512), and fuse-elemwise
 * last, so it does not take the chains that the layers absorb. */
#define MGE_O2_FOLDS "strip-training,fold-bn,fold-scale,cse,fold-constants,dce,fuse-activation"
#define MGE_O2_LAYOUT "layout,winograd,fuse-elemwise"
/* -O3 adds bf16 before the layout pass (so its convs stay direct, not
 * Winograd) and f16 weights at the end. */
static const char *const presets[4] = {
    "",
    "cse,fold-constants,dce",
    MGE_O2_FOLDS "," MGE_O2_LAYOUT,
    MGE_O2_FOLDS ",bf16," MGE_O2_LAYOUT ",f16-weights",
};

int mge_pass_count(void)
{
    return NPASSES;
}

const mge_pass *mge_pass_get(int i)
{
    return i >= 0 && i < NPASSES ? &registry[i] : NULL;
}

const mge_pass *mge_pass_find(const char *name)
{
    if (!name)
        return NULL;
    for (int i = 0; i < NPASSES; i++)
        if (strcmp(registry[i].name, name) == 0)
            return &registry[i];
    return NULL;
}

const char *mge_pass_preset(int level)
{
    return level >= 0 && level <= 3 ? presets[level] : NULL;
}

static mge_status unknown_pass(const char *name, mge_error *err)
{
    char known[512];
    size_t k = 0;
    known[0] = 0;
    for (int i = 0; i < NPASSES && k < sizeof known; i++)
        k += (size_t)snprintf(known + k, sizeof known - k, "%s%s", i ? ", " : "", registry[i].name);
    return mge_error_set(err, MGE_ERR_INVALID, "unknown pass '%s' (known passes: %s)", name, known);
}

mge_status mge_passes_run(mge_graph **g, int n, const char *const *names, int *changed, mge_error *err)
{
    if (changed)
        *changed = 0;
    if (!g || !*g || n < 0 || (n > 0 && !names))
        return mge_error_set(err, MGE_ERR_INVALID, "mge_passes_run: bad arguments");
    for (int i = 0; i < n; i++)
        if (!mge_pass_find(names[i]))
            return unknown_pass(names[i] ? names[i] : "", err);
    for (int i = 0; i < n; i++) {
        const mge_pass *p = mge_pass_find(names[i]);
        int ch = 0;
        mge_status s = p->run(g, &ch, err);
        if (!s)
            s = mge_graph_validate(*g, err);
        if (s) {
            mge_error_prefix(err, "pass %s", p->name);
            return s;
        }
        if (ch && changed)
            *changed = 1;
    }
    return MGE_OK;
}

mge_status mge_passes_run_list(mge_graph **g, const char *list, int *changed, mge_error *err)
{
    if (changed)
        *changed = 0;
    if (!list || !*list)
        return MGE_OK;
    char *copy = mge_strdup(list);
    int cap = 1;
    for (const char *p = list; *p; p++)
        cap += *p == ',';
    const char **names = malloc(sizeof *names * (size_t)cap);
    if (!copy || !names) {
        free(copy);
        free(names);
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    }
    int n = 0;
    mge_status s = MGE_OK;
    for (char *item = copy;;) {
        char *comma = strchr(item, ',');
        if (comma)
            *comma = 0;
        if (!*item) {
            s = mge_error_set(err, MGE_ERR_INVALID, "empty pass name in '%s'", list);
            break;
        }
        names[n++] = item;
        if (!comma)
            break;
        item = comma + 1;
    }
    if (!s)
        s = mge_passes_run(g, n, names, changed, err);
    free(names);
    free(copy);
    return s;
}
