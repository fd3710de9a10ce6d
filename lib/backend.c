/* backend.c — the kernel tables: `ref` (plain C oracles, kernels/ref) and
 * `cpu` (a copy of ref with the fast kernels of kernels/cpu on top). Each
 * table is built once, on first use, and never changes afterwards, so
 * lookups need no locking. */
#include "internal.h"

#include <pthread.h>
#include <string.h>

static mge_backend ref_be, cpu_be;
static pthread_once_t ref_once = PTHREAD_ONCE_INIT, cpu_once = PTHREAD_ONCE_INIT;

static void build_ref(void)
{
    ref_be.name = "ref";
    mge_ref_register_conv(&ref_be);
    mge_ref_register_linear(&ref_be);
    mge_ref_register_norm(&ref_be);
    mge_ref_register_unary(&ref_be);
    mge_ref_register_binary(&ref_be);
    mge_ref_register_pool(&ref_be);
    mge_ref_register_reduce(&ref_be);
    mge_ref_register_shape(&ref_be);
    mge_ref_register_loss(&ref_be);
    mge_ref_register_grad_conv(&ref_be);
    mge_ref_register_grad_pool(&ref_be);
    mge_ref_register_grad_elem(&ref_be);
    mge_ref_register_grad_reduce(&ref_be);
    mge_ref_register_grad_norm(&ref_be);
    mge_ref_register_optim(&ref_be);
    mge_ref_register_fused(&ref_be);
    mge_ref_register_fused_elem(&ref_be);
    mge_ref_register_winograd(&ref_be);
    mge_ref_register_blocked(&ref_be);
    mge_ref_register_quant(&ref_be);
    mge_ref_register_index(&ref_be);
    mge_ref_register_logic(&ref_be);
    mge_ref_register_convt(&ref_be);
    mge_ref_register_apool(&ref_be);
    mge_ref_register_rnn(&ref_be);
    mge_ref_register_resize(&ref_be);
    mge_ref_register_sample(&ref_be);
    mge_ref_register_roi(&ref_be);
    mge_ref_register_deform(&ref_be);
    mge_ref_register_pad(&ref_be);
    mge_ref_register_gnorm(&ref_be);
    mge_ref_register_sort(&ref_be);
    mge_ref_register_attn(&ref_be);
    mge_ref_register_comm(&ref_be);
    mge_ref_register_bitwise(&ref_be);
    mge_ref_register_emath(&ref_be);
    mge_ref_register_qlin(&ref_be);
    mge_ref_register_pool3d(&ref_be);
}

static void build_cpu(void)
{
    pthread_once(&ref_once, build_ref);
    cpu_be = ref_be;
    cpu_be.name = "cpu";
    mge_cpu_register_gemm(&cpu_be);
    mge_cpu_register_elemwise(&cpu_be);
    mge_cpu_register_pool(&cpu_be);
    mge_cpu_register_misc(&cpu_be);
    mge_cpu_register_shape(&cpu_be);
    mge_cpu_register_grad_conv(&cpu_be);
    mge_cpu_register_grad_pool(&cpu_be);
    mge_cpu_register_grad_elem(&cpu_be);
    mge_cpu_register_grad_norm(&cpu_be);
    mge_cpu_register_optim(&cpu_be);
    mge_cpu_register_fused_elem(&cpu_be);
    mge_cpu_register_winograd(&cpu_be);
    mge_cpu_register_blocked(&cpu_be);
    mge_cpu_register_qgemm(&cpu_be);
    mge_cpu_register_quant(&cpu_be);
    mge_cpu_register_index(&cpu_be);
    mge_cpu_register_logic(&cpu_be);
    mge_cpu_register_convt(&cpu_be);
    mge_cpu_register_apool(&cpu_be);
    mge_cpu_register_rnn(&cpu_be);
    mge_cpu_register_resize(&cpu_be);
    mge_cpu_register_pad(&cpu_be);
    mge_cpu_register_gnorm(&cpu_be);
    mge_cpu_register_sort(&cpu_be);
    mge_cpu_register_permute(&cpu_be);
    mge_cpu_register_grad_layernorm(&cpu_be);
    mge_cpu_register_attn(&cpu_be);
    mge_cpu_register_loss(&cpu_be);
    mge_cpu_register_comm(&cpu_be);
    mge_cpu_register_qlin(&cpu_be);
    mge_cpu_register_pool3d(&cpu_be);
}

const mge_backend *mge_backend_ref(void)
{
    pthread_once(&ref_once, build_ref);
    return &ref_be;
}

const mge_backend *mge_backend_cpu(void)
{
    pthread_once(&cpu_once, build_cpu);
    return &cpu_be;
}

const mge_backend *mge_backend_get(const char *name)
{
    if (!name)
        return NULL;
    if (strcmp(name, "cpu") == 0)
        return mge_backend_cpu();
    if (strcmp(name, "ref") == 0)
        return mge_backend_ref();
    return NULL;
}

const mge_kernel *mge_backend_kernel(const mge_backend *b, int op, mge_dtype dt)
{
    if (op < 0 || op >= MGE_NOPS || (unsigned)dt >= MGE_NDTYPES)
        return NULL;
    if (b && b->k[op][dt].run)
        return &b->k[op][dt];
    const mge_backend *r = mge_backend_ref();
    return r->k[op][dt].run ? &r->k[op][dt] : NULL;
}
