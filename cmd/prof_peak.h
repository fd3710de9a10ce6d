/* prof_peak.h — the machine's measured GEMM peak for mge-prof's "% of peak".
 *
 * A short probe times a 512x512x512 matmul through the executor (the same
 * kernels the models use) with 1 thread and with `threads`, and keeps the
 * best GFLOP/s of each. Results are cached in $XDG_CACHE_HOME/mge/peak
 * (default ~/.cache/mge/peak), one line per (CPU model, thread count):
 * "MODEL<TAB>THREADS<TAB>GFLOPS". A cache that cannot be read or written is
 * not an error: the probe just runs again next time. */
#ifndef MGE_CMD_PROF_PEAK_H
#define MGE_CMD_PROF_PEAK_H

/* The CPU model string ("model name" in /proc/cpuinfo, else "unknown"). */
const char *prof_cpu_model(void);
/* Path of the cache file (static storage), or NULL when there is no home. */
const char *prof_peak_path(void);
/* Peak GFLOP/s with `threads` threads, cached or probed; *cached tells
 * which. Returns a value <= 0 when the probe failed (printed with -v). */
double prof_peak(int threads, int *cached);

#endif
