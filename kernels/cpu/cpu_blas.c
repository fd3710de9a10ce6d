/* cpu_blas.c — OpenBLAS runs single-threaded inside our pool.
 *
 * mge has one thread pool (kernels/cpu/cpu_pool_threads.c). OpenBLAS's own workers would spin
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
#include <strings.h>

void mge_blas_set_threads(int n)
{
    openblas_set_num_threads(n < 1 ? 1 : n);
}

/* OpenBLAS picks its kernels once, when it is loaded, from the CPU model.
 * A model it does not know (Debian's 0.3.21 on recent Xeons reports an
 * "Intel(R) Xeon(R) Processor" it cannot place) gets its SSE3 "Prescott"
 * kernels, 2-3x slower than the AVX2/AVX-512 ones the CPU can run. The
 * choice can only be changed before loading, through OPENBLAS_CORETYPE, so
 * the tools re-execute themselves with it set (cmd/cli.c). */
const char *mge_blas_better_coretype(void)
{
    static const char *const modern[] = {"haswell", "zen", "skylakex", "cooperlake", "sapphirerapids"};
    const char *cur = openblas_get_corename();
    if (!cur)
        return NULL;
    for (size_t i = 0; i < sizeof modern / sizeof modern[0]; i++)
        if (strcasecmp(cur, modern[i]) == 0)
            return NULL;
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
        return NULL;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512cd"))
        return "SkylakeX";
    return "Haswell";
}
