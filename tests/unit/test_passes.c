/* test_passes.c — the pass registry, presets, the runner and dce. */
#include "mge.h"
#include "unit.h"

static const char *net =
    "input x : f32[N,4]\n"
    "input unused_in : f32[N,2]\n"
    "fc1 = linear(x, out=8)\n"
    "act = relu(fc1)\n"
    "dead1 = sigmoid(act)\n"
    "dead2 = linear(dead1, out=3)\n"
    "fc2 = linear(act, out=3)\n"
    "output fc2\n";

static mge_graph *parse(const char *src)
{
    mge_graph *g = NULL;
    mge_error err;
    mge_error_clear(&err);
    CHECK_OK(mge_text_parse(src, strlen(src), ".", &g, &err), err);
    return g;
}

static void test_registry(void)
{
    CHECK(mge_pass_count() >= 1);
    const mge_pass *p = mge_pass_find("dce");
    CHECK(p != NULL);
    CHECK(p && p->run && p->summary && *p->summary);
    CHECK(mge_pass_find("nosuch") == NULL);
    CHECK(mge_pass_find(NULL) == NULL);
    CHECK(mge_pass_get(-1) == NULL);
    CHECK(mge_pass_get(mge_pass_count()) == NULL);
    for (int i = 0; i < mge_pass_count(); i++)
        CHECK(mge_pass_find(mge_pass_get(i)->name) == mge_pass_get(i));
    CHECK(mge_pass_preset(0) && strcmp(mge_pass_preset(0), "") == 0);
    CHECK(mge_pass_preset(1) && strstr(mge_pass_preset(1), "dce"));
    CHECK(mge_pass_preset(4) == NULL);
    CHECK(mge_pass_preset(-1) == NULL);
}

static void test_dce(void)
{
    mge_graph *g = parse(net);
    if (!g)
        return;
    mge_error err;
    mge_error_clear(&err);
    CHECK_OK(mge_graph_init_params(g, 1, &err), err);
    int w = mge_graph_find(g, "fc2.weight");
    CHECK(w >= 0);
    const mge_tensor *wdata = w >= 0 ? g->values[w].data : NULL;
    int nnodes = g->nnodes;
    int changed = 0;
    const char *names[] = {"dce"};
    CHECK_OK(mge_passes_run(&g, 1, names, &changed, &err), err);
    CHECK(changed == 1);
    CHECK(g->nnodes == nnodes - 2);
    CHECK(mge_graph_find(g, "dead1") < 0);
    CHECK(mge_graph_find(g, "dead2") < 0);
    CHECK(mge_graph_find(g, "dead2.weight") < 0);  /* params only dead nodes used go too */
    CHECK(mge_graph_find(g, "fc1.weight") >= 0);
    CHECK(g->ninputs == 2);                         /* inputs are the interface: kept */
    CHECK(g->ninputs == 2 && strcmp(g->values[g->inputs[1]].name, "unused_in") == 0);
    CHECK(g->noutputs == 1 && strcmp(g->values[g->outputs[0]].name, "fc2") == 0);
    w = mge_graph_find(g, "fc2.weight");
    CHECK(w >= 0 && g->values[w].data == wdata);    /* data moved, not copied */
    for (int i = 0; i < g->nnodes; i++)
        for (int k = 0; k < g->nodes[i].nout; k++)
            CHECK(g->values[g->nodes[i].out[k]].producer == i);
    CHECK_OK(mge_graph_validate(g, &err), err);
    /* a second run finds nothing */
    CHECK_OK(mge_passes_run_list(&g, "dce", &changed, &err), err);
    CHECK(changed == 0);
    mge_graph_free(g);
}

static void test_dce_keeps_loss(void)
{
    mge_graph *g = parse("input x : f32[N,4]\ninput y : i32[N]\nfc = linear(x, out=3)\n"
                         "extra = relu(fc)\nloss = cross_entropy(fc, y)\noutput fc\nminimize loss\n");
    if (!g)
        return;
    mge_error err;
    mge_error_clear(&err);
    int changed = 0;
    CHECK_OK(mge_passes_run_list(&g, "dce", &changed, &err), err);
    CHECK(changed == 1);
    CHECK(mge_graph_find(g, "extra") < 0);
    CHECK(g->loss >= 0 && strcmp(g->values[g->loss].name, "loss") == 0);
    mge_graph_free(g);
}

static void test_runner_errors(void)
{
    mge_graph *g = parse(net);
    if (!g)
        return;
    mge_error err;
    mge_error_clear(&err);
    int nnodes = g->nnodes, changed = 1;
    /* an unknown name fails before anything runs and lists the known passes */
    const char *names[] = {"dce", "bogus"};
    CHECK(mge_passes_run(&g, 2, names, &changed, &err) == MGE_ERR_INVALID);
    CHECK(strstr(err.msg, "bogus") && strstr(err.msg, "dce"));
    CHECK(g->nnodes == nnodes);
    CHECK(changed == 0);
    CHECK(mge_passes_run_list(&g, "dce,,dce", NULL, &err) == MGE_ERR_INVALID);
    CHECK(g->nnodes == nnodes);
    CHECK_OK(mge_passes_run_list(&g, "", NULL, &err), err);
    CHECK_OK(mge_passes_run(&g, 0, NULL, NULL, &err), err);
    CHECK(g->nnodes == nnodes);
    mge_graph_free(g);
}

int main(void)
{
    RUN(test_registry);
    RUN(test_dce);
    RUN(test_dce_keeps_loss);
    RUN(test_runner_errors);
    return unit_done();
}
