/* dtype.c — dtype names, sizes and half-precision conversions. */
#include "internal.h"

#include <math.h>
#include <string.h>

static const struct {
    const char *name;
    size_t size;
} dtypes[MGE_NDTYPES] = {
    [MGE_F32] = {"f32", 4}, [MGE_F16] = {"f16", 2}, [MGE_BF16] = {"bf16", 2},
    [MGE_I8] = {"i8", 1},   [MGE_U8] = {"u8", 1},   [MGE_I32] = {"i32", 4},
    [MGE_I64] = {"i64", 8}, [MGE_BOOL] = {"bool", 1}, [MGE_QS8] = {"qs8", 1},
    [MGE_QS32] = {"qs32", 4}, [MGE_F64] = {"f64", 8}, [MGE_I16] = {"i16", 2},
    [MGE_U16] = {"u16", 2}, [MGE_U32] = {"u32", 4}, [MGE_U64] = {"u64", 8},
};

const char *mge_dtype_name(mge_dtype dt)
{
    return (unsigned)dt < MGE_NDTYPES ? dtypes[dt].name : "?";
}

int mge_dtype_parse(const char *s, size_t n, mge_dtype *out)
{
    for (int i = 0; i < MGE_NDTYPES; i++)
        if (strlen(dtypes[i].name) == n && memcmp(dtypes[i].name, s, n) == 0) {
            *out = (mge_dtype)i;
            return 1;
        }
    return 0;
}

size_t mge_dtype_size(mge_dtype dt)
{
    return (unsigned)dt < MGE_NDTYPES ? dtypes[dt].size : 0;
}

int mge_dtype_is_float(mge_dtype dt)
{
    return dt == MGE_F32 || dt == MGE_F16 || dt == MGE_BF16 || dt == MGE_F64;
}

static uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t mge_f32_to_f16(float f)
{
    uint32_t x = f2u(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf or nan: keep a quiet nan payload bit */
        return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0));
    if (ax >= 0x477ff000u) /* rounds to >= 65520: overflow to inf */
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) { /* subnormal half (or zero): scale by 2^24 and round */
        float v = u2f(ax) * 16777216.0f; /* exact; v < 1024 */
        uint32_t r = (uint32_t)v;
        float frac = v - (float)r;
        if (frac > 0.5f || (frac == 0.5f && (r & 1)))
            r++;
        return (uint16_t)(sign | r);
    }
    uint32_t mant = ax & 0x7fffffu;
    uint32_t exp = (ax >> 23) - 112; /* rebias 127 -> 15 */
    uint32_t h = (exp << 10) | (mant >> 13);
    uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1)))
        h++; /* may carry into the exponent, which is the right result */
    return (uint16_t)(sign | h);
}

float mge_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0) {
        float v = (float)mant / 16777216.0f;
        return sign ? -v : v;
    }
    if (exp == 31)
        return u2f(sign | 0x7f800000u | (mant << 13));
    return u2f(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t mge_f32_to_bf16(float f)
{
    uint32_t x = f2u(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

float mge_bf16_to_f32(uint16_t h)
{
    return u2f((uint32_t)h << 16);
}

/* d as a float rounded to odd: truncated, the last bit set when inexact.
 * Rounding that float again to f16 or bf16 (at least two bits narrower)
 * gives d correctly rounded, which rounding to nearest twice does not (a
 * double just above a tie becomes the tie). */
static float d2f_odd(double d)
{
    float f = (float)d;
    if ((double)f == d || d != d)
        return f;
    if (fabs((double)f) > fabs(d))
        f = nextafterf(f, 0.0f);
    uint32_t u = f2u(f) | 1;
    return u2f(u);
}

uint16_t mge_f64_to_f16(double d)
{
    return mge_f32_to_f16(d2f_odd(d));
}

uint16_t mge_f64_to_bf16(double d)
{
    return mge_f32_to_bf16(d2f_odd(d));
}

double mge_dtype_get(mge_dtype dt, const void *p, int64_t i)
{
    switch (dt) {
    case MGE_F32: return ((const float *)p)[i];
    case MGE_F16: return mge_f16_to_f32(((const uint16_t *)p)[i]);
    case MGE_BF16: return mge_bf16_to_f32(((const uint16_t *)p)[i]);
    case MGE_F64: return ((const double *)p)[i];
    case MGE_I8: case MGE_QS8: return ((const int8_t *)p)[i];
    case MGE_U8: return ((const uint8_t *)p)[i];
    case MGE_BOOL: return ((const uint8_t *)p)[i] != 0;
    case MGE_I16: return ((const int16_t *)p)[i];
    case MGE_U16: return ((const uint16_t *)p)[i];
    case MGE_I32: case MGE_QS32: return ((const int32_t *)p)[i];
    case MGE_U32: return ((const uint32_t *)p)[i];
    case MGE_I64: return (double)((const int64_t *)p)[i];
    case MGE_U64: return (double)((const uint64_t *)p)[i];
    default: return 0;
    }
}

/* v clamped to [lo, hi] and truncated toward zero; NaN is 0. */
static double sat(double v, double lo, double hi)
{
    return v != v ? 0 : v <= lo ? lo : v >= hi ? hi : v;
}

void mge_dtype_set(mge_dtype dt, void *p, int64_t i, double v)
{
    switch (dt) {
    case MGE_F32: ((float *)p)[i] = (float)v; break;
    case MGE_F16: ((uint16_t *)p)[i] = mge_f64_to_f16(v); break;
    case MGE_BF16: ((uint16_t *)p)[i] = mge_f64_to_bf16(v); break;
    case MGE_F64: ((double *)p)[i] = v; break;
    case MGE_I8: case MGE_QS8: ((int8_t *)p)[i] = (int8_t)sat(v, INT8_MIN, INT8_MAX); break;
    case MGE_U8: ((uint8_t *)p)[i] = (uint8_t)sat(v, 0, UINT8_MAX); break;
    case MGE_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    case MGE_I16: ((int16_t *)p)[i] = (int16_t)sat(v, INT16_MIN, INT16_MAX); break;
    case MGE_U16: ((uint16_t *)p)[i] = (uint16_t)sat(v, 0, UINT16_MAX); break;
    case MGE_I32: case MGE_QS32: ((int32_t *)p)[i] = (int32_t)sat(v, INT32_MIN, INT32_MAX); break;
    case MGE_U32: ((uint32_t *)p)[i] = (uint32_t)sat(v, 0, UINT32_MAX); break;
    /* 2^63 and 2^64 are the first doubles out of range */
    case MGE_I64: ((int64_t *)p)[i] = v >= 0x1p63 ? INT64_MAX : (int64_t)sat(v, -0x1p63, 0x1p63); break;
    case MGE_U64: ((uint64_t *)p)[i] = v >= 0x1p64 ? UINT64_MAX : (uint64_t)sat(v, 0, 0x1p64); break;
    default: break;
    }
}
