/*
 * The shared header of crawler._native._compiled, the one compiled extension
 * of the crawler: its hot loops in C, each with a pure-Python twin in the
 * module that uses it (tests check that both give identical results).
 *
 * Why C: the splitter and the DUE ask a URL cache once per link, and replay
 * asks it hundreds of millions of times.  A Python method costs ~100 ns
 * before it does anything; a METH_O method of a C type costs a few ns, and a
 * batch loop over a uint64 buffer costs nothing per element.
 *
 * No numpy C API: arrays come in through the buffer protocol (Py_buffer) and
 * the result arrays are made by calling numpy.empty, so only Python.h is
 * needed at build time.
 *
 * The sources, one concern each (the Python module using it in brackets):
 *   args.c            arguments: fingerprints, uint64/int64 buffers, paths, bool results
 *   tables.c          zeroed tables, large ones on huge pages
 *   cache_clock.c     ClockKernel: the paper's CLOCK, one ring    [crawler/cache/clock.py]
 *   cache_clock_sets.c ClockSetsKernel: set-associative CLOCK     [crawler/cache/clock_sets.py]
 *   cache_lru.c       LruKernel: exact LRU                        [crawler/cache/lru.py]
 *   cache_random.c    RandomKernel: random victim (splitmix64)    [crawler/cache/random_policy.py]
 *   cache_set.c       SetKernel: hash set (INFINITE, STATIC)      [crawler/cache/hashset.py]
 *   cache_sieve.c     SieveKernel: SIEVE                          [crawler/cache/sieve.py]
 *   lru_stack.c       LruStackKernel: bounded LRU stack distances [crawler/replay/streaming.py]
 *   belady.c          belady(): MIN's hit sequence, offline       [crawler/cache/min.py]
 *                     BeladyKernel: MIN fed chunk by chunk        [crawler/replay/min_streaming.py]
 *   next_use.c        NextUseKernel: next uses, out of core       [crawler/replay/min_streaming.py]
 *   crc32.c           zlib's CRC-32 (slice-by-8, PCLMUL folding)  [the DUE journal's checksum]
 *   due_submit.c      due_submit(): the DUE's submit pass         [crawler/due/submit_pass.py]
 *   due_front.c       DueFront: DiskDUE.submit's hot path         [crawler/due/front.py]
 *   due_merge.c       the DUE's merge passes (GIL released)       [crawler/due/merge_pass.py]
 *   due_files.c       fsync / unlink / pre-fault files (threads)  [crawler/due/merge_pass.py, journal.py]
 *   splitter_owners.c split_owners(): the splitter's owner pass  [crawler/splitter/owner_pass.py]
 *   module.c          the module: PyInit, method table, types
 *   cache_kernel.h    what the five cache types share (batch macros, position index)
 * _compiled.pyi describes everything the module exports.
 *
 * Every symbol shared between the sources is declared here; the extension is
 * built with -fvisibility=hidden, so only PyInit__compiled leaves the .so.
 */
#ifndef CRAWLER_NATIVE_H
#define CRAWLER_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef unsigned __int128 u128;

/* ---------------------------------------------------------------- hashing */

/* MurmurHash3's 64-bit finalizer: a bijection of uint64 (so no two
 * fingerprints collide), fmix64(0) == 0. Same constants as cache/_mix.py. */
static inline uint64_t fmix64(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xFF51AFD7ED558CCDULL;
    k ^= k >> 33;
    k *= 0xC4CEB9FE1A85EC53ULL;
    k ^= k >> 33;
    return k;
}

/* splitmix64 step (Steele, Lea & Flood): the random policy's generator. */
static inline uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Lemire's multiply-shift range reduction: floor(x * n / 2^64), monotone in x. */
static inline uint64_t fastrange(uint64_t x, uint64_t n)
{
    return (uint64_t)(((u128)x * n) >> 64);
}

/* ------------------------------------------------------- args.c */

int args_init(void);   /* numpy's callables, once at module init; -1 with an exception set */
int fp_from_object(PyObject *obj, uint64_t *fp);
int get_u64_view(PyObject *obj, Py_buffer *view, PyObject **owner);
PyObject *new_bool_array(Py_ssize_t n, Py_buffer *out);
int get_paths(PyObject *list, Py_ssize_t count, const char **out, const char *what);
int get_array(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, Py_ssize_t min_items, int writable,
              const char *what);

/* ------------------------------------------------------- tables.c */

size_t table_bytes(size_t bytes);
void *alloc_table(size_t bytes);
void free_table(void *p, size_t bytes);
void *alloc_zeroed(size_t count, size_t size);

/* A kernel's method called before its __init__ ran (or after it failed). */
#define NOT_READY(self) \
    (PyErr_SetString(PyExc_RuntimeError, "cache kernel used before __init__"), (PyObject *)NULL)

/* ------------------------------------------------------- the types */

extern PyTypeObject ClockType, ClockSetsType, LruType, RandomType, SetType, SieveType, LruStackType, FrontType,
    BeladyType, NextUseType;

void clock_sets_detect_cpu(void);   /* picks the set-associative CLOCK's AVX2 loop where the CPU has it */

/* The batch loop of a compiled cache policy run straight from C (the DUE's
 * probe): 1 if `cache` is a ready ClockKernel / ClockSetsKernel / LruKernel /
 * RandomKernel and
 * hits[i] now holds its answer for fps[i], 0 if it is not one. */
int clock_probe(PyObject *cache, const uint64_t *fps, uint8_t *hits, Py_ssize_t n);
int clock_sets_probe(PyObject *cache, const uint64_t *fps, uint8_t *hits, Py_ssize_t n);
int lru_probe(PyObject *cache, const uint64_t *fps, uint8_t *hits, Py_ssize_t n);
int random_probe(PyObject *cache, const uint64_t *fps, uint8_t *hits, Py_ssize_t n);

/* ------------------------------------------------------- crc32.c */

void crc32_init(void);
uint32_t crc32_update(uint32_t crc, const uint8_t *p, size_t n);

/* ------------------------------------------------------- due_submit.c */

Py_ssize_t due_accept(PyObject *cache, PyObject *fps_obj, const uint64_t *src, Py_ssize_t count,
                      PyObject *urls, uint64_t *dst, PyObject *buf_urls, PyObject *window_obj,
                      Py_ssize_t pos, Py_ssize_t *size);

/* ------------------------------------------------------- the module's functions */

PyObject *belady(PyObject *module, PyObject *args);
PyObject *crc32_py(PyObject *module, PyObject *args);
PyObject *due_submit(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *due_sort_unique(PyObject *module, PyObject *args);
PyObject *due_find_new(PyObject *module, PyObject *args);
PyObject *due_write_buckets(PyObject *module, PyObject *args);
PyObject *due_pick(PyObject *module, PyObject *args);
PyObject *due_fsync_files(PyObject *module, PyObject *args);
PyObject *due_remove_files(PyObject *module, PyObject *args);
PyObject *due_populate_write(PyObject *module, PyObject *arg);
PyObject *split_owners(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif
