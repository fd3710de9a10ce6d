/* test_permute.c — the cpu transpose kernel (kernels/cpu/cpu_permute.c)
 * against ref, bit for bit, on each of its paths at sizes that split over
 * two threads: runs of the kept last dim (attention's [N,S,H,D] ->
 * [N,H,S,D]), the blocked 2-D transpose per batch ([B,A,C] -> [B,C,A],
 * odd sizes), the element loop (a full reversal), merged neighbours and
 * size-1 dims, and an i32 tensor. */
#include "internal.h"
#include "unit.h"
#include "unit_graph.h"

static void one(const char *src)
{
    mge_graph *g = ug_parse(src);
    if (!g)
        return;
    ug_outs a = {0}, b = {0};
    ug_fill f = {.lo = -1, .hi = 1};
    int ok = ug_run(g, "ref", 1, 2, f, &a) && ug_run(g, "cpu", 2, 2, f, &b);
    CHECK_MSG(ok, "%s", src);
    if (ok)
        CHECK_MSG(ug_check_close(&a, &b, 0) == 0, "%s", src);
    ug_outs_free(&a);
    ug_outs_free(&b);
    mge_graph_free(g);
}

static void test_paths(void)
{
    one("input x : f32[N,64,4,16]\ny = transpose(x, perm=[0,2,1,3])\noutput y\n");
    one("input x : f32[N,37,45]\ny = transpose(x, perm=[0,2,1])\noutput y\n");
    one("input x : f32[N,3,5,7,9]\ny = transpose(x, perm=[4,3,2,1,0])\noutput y\n");
    one("input x : f32[N,1,6,1,5,4]\ny = transpose(x, perm=[3,4,5,0,1,2])\noutput y\n");
    one("input x : f32[N,33,9,2]\ny = transpose(x, perm=[2,0,1,3])\noutput y\n");
    one("input x : i32[N,40,3,11]\ny = transpose(x, perm=[0,2,3,1])\noutput y\n");
    one("input x : f32[N,300,200]\ny = transpose(x, perm=[2,1,0])\noutput y\n");
}

int main(void)
{
    RUN(test_paths);
    return unit_done();
}
