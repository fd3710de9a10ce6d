/* blas.c — OpenBLAS runs single-threaded inside our pool.
 *
 * mge has one thread pool (lib/pool.c). OpenBLAS's own workers would spin
 * after every call and compete with it for the cores, so OpenBLAS is set to
 * one thread and the kernels split each BLAS call into blocks that run as
 * pool tasks (kernels/cpu/cpu_gemm.c): several threads may be inside
 * cblas_sgemm/sgemv at once, each on its own block.
 *
 * Concurrent calls are safe with the OpenBLAS we build against (Debian
 * 0.3.21, libopenblas0-pthread, a USE_THREAD=1 build, whose buffer
 * allocator is locked): with one thread a level-2/3 call runs entirely on
 * the calling thread and takes its own packing buffer. The races reported
 * for concurrent callers (OpenBLAS issues #1761, #2126, #2164 in
 * 0.3.2-0.3.6, #2444 on a 96-core machine) were all closed as fixed in
 * releases years before 0.3.21. One OpenBLAS thread inside a threaded
 * program is also what OpenBLAS's FAQ advises. tests/unit/test_kernels.c
 * runs blocked sgemm/sgemv on two and three threads and checks the
 * results bit for bit against one thread. */
#include "internal.h"

#include <cblas.h>

void mge_blas_set_threads(int n)
{
    openblas_set_num_threads(n < 1 ? 1 : n);
}
