/*
 * What the five cache kernel types (cache_clock.c, cache_clock_sets.c,
 * cache_lru.c, cache_random.c, cache_set.c) share: the batch and single-request method
 * bodies around a policy's access function, the getter of a uint64 field,
 * and the position index of LRU and RANDOM.
 */
#ifndef CRAWLER_NATIVE_CACHE_KERNEL_H
#define CRAWLER_NATIVE_CACHE_KERNEL_H

#include "native.h"

/* Requests ahead of the current one whose table memory the batch loop
 * prefetches: a batch's lookups are independent, so their cache misses can
 * overlap. */
#define PREFETCH_AHEAD 8

/* The loop of a batch: dst[i] = ACCESS(self, src[i]), prefetching ahead.  The
 * first PREFETCH_AHEAD requests are prefetched before the loop too: the DUE's
 * batches are a page's links (median ~20), so without that their first
 * eight probes would each wait for memory in turn. */
#define DEFINE_LOOP(NAME, TYPE, ACCESS, PREFETCH)                               \
    static void NAME(TYPE *self, const uint64_t *src, uint8_t *dst, Py_ssize_t n) \
    {                                                                          \
        for (Py_ssize_t i = 0; i < n && i < PREFETCH_AHEAD; i++)               \
            PREFETCH(self, src[i]);                                            \
        for (Py_ssize_t i = 0; i < n; i++) {                                   \
            if (i + PREFETCH_AHEAD < n)                                        \
                PREFETCH(self, src[i + PREFETCH_AHEAD]);                       \
            dst[i] = (uint8_t)ACCESS(self, src[i]);                            \
        }                                                                      \
    }

/* The batch method of every kernel: argument handling around its loop. */
#define DEFINE_BATCH(NAME, TYPE, LOOP, READY)                                   \
    static PyObject *NAME(TYPE *self, PyObject *fps)                           \
    {                                                                          \
        if (!(READY))                                                          \
            return NOT_READY(self);                                            \
        Py_buffer in, out;                                                     \
        PyObject *owner;                                                       \
        if (get_u64_view(fps, &in, &owner) < 0)                                \
            return NULL;                                                       \
        Py_ssize_t n = in.len / 8;                                             \
        PyObject *result = new_bool_array(n, &out);                            \
        if (result != NULL) {                                                  \
            LOOP(self, (const uint64_t *)in.buf, (uint8_t *)out.buf, n);       \
            PyBuffer_Release(&out);                                            \
        }                                                                      \
        PyBuffer_Release(&in);                                                 \
        Py_XDECREF(owner);                                                     \
        return result;                                                         \
    }

#define DEFINE_SINGLE(NAME, TYPE, ACCESS, READY)                                \
    static PyObject *NAME(TYPE *self, PyObject *arg)                           \
    {                                                                          \
        uint64_t fp;                                                           \
        if (!(READY))                                                          \
            return NOT_READY(self);                                            \
        if (fp_from_object(arg, &fp) < 0)                                      \
            return NULL;                                                       \
        if (ACCESS(self, fp))                                                  \
            Py_RETURN_TRUE;                                                    \
        Py_RETURN_FALSE;                                                       \
    }

#define U64_GETTER(FN, TYPE, FIELD) \
    static PyObject *FN(TYPE *self, void *Py_UNUSED(c)) { return PyLong_FromUnsignedLongLong(self->FIELD); }

/* What every kernel type has: its counters' getters (with its own size and
 * buffer_bytes getters, written where they differ), their getset entries, the
 * two request methods, and the type object. */
#define DEFINE_COUNTERS(PREFIX, TYPE)                                            \
    U64_GETTER(PREFIX##_get_capacity, TYPE, capacity)                            \
    U64_GETTER(PREFIX##_get_hits, TYPE, hits)                                    \
    U64_GETTER(PREFIX##_get_misses, TYPE, misses)

#define COUNTER_GETSETS(PREFIX, CAPACITY_DOC, SIZE_DOC)                                           \
    {"capacity", (getter)PREFIX##_get_capacity, NULL, CAPACITY_DOC, NULL},                        \
    {"size", (getter)PREFIX##_get_size, NULL, SIZE_DOC, NULL},                                    \
    {"hits", (getter)PREFIX##_get_hits, NULL, "Requests that found their fingerprint.", NULL},    \
    {"misses", (getter)PREFIX##_get_misses, NULL, "Requests that did not.", NULL},                \
    {"buffer_bytes", (getter)PREFIX##_get_buffer_bytes, NULL, "Bytes of the heap arrays.", NULL}

#define CACHED_DOC "check_and_add(fp) -> bool: True if fp is cached (a hit); a miss inserts fp."
#define REQUEST_METHODS(PREFIX, CHECK_DOC)                                       \
    {"check_and_add", (PyCFunction)PREFIX##_check_and_add, METH_O, CHECK_DOC},   \
    {"check_and_add_many", (PyCFunction)PREFIX##_check_and_add_many, METH_O,     \
     "check_and_add_many(fps) -> bool array: check_and_add on each element, in order."}

#define KERNEL_TYPE(NAME, OBJECT, PREFIX, DOC)                                   \
    {                                                                            \
        PyVarObject_HEAD_INIT(NULL, 0)                                           \
        .tp_name = "crawler._native._compiled." NAME,                            \
        .tp_basicsize = sizeof(OBJECT),                                          \
        .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,                    \
        .tp_doc = DOC,                                                           \
        .tp_new = PyType_GenericNew,                                             \
        .tp_init = (initproc)PREFIX##_init,                                      \
        .tp_dealloc = (destructor)PREFIX##_dealloc,                              \
        .tp_methods = PREFIX##_methods,                                          \
        .tp_getset = PREFIX##_getset,                                            \
    }

/* ======================================================= position index */
/*
 * Open-addressing table (linear probing, power-of-two size) mapping a
 * fingerprint to its position in a key array: slots hold position + 1, 0 is
 * empty, and a probe compares keys[pos] with the fingerprint.  Deletion by
 * backward shift (Knuth 6.4 Algorithm R), so there are no tombstones.
 * Used by CLOCK, LRU and RANDOM, whose key arrays are in policy order.
 */
typedef struct {
    uint32_t *slots;
    uint64_t mask;
} PosIndex;

static inline uint64_t pos_index_size(uint64_t capacity)
{
    uint64_t m = 1;
    while (m < 2 * capacity)  /* load factor <= 1/2 */
        m <<= 1;
    return m;
}

/* The table slot of fp (slots[i] != 0) or of the empty slot where it would go.
 * The key of position p is keys[p * stride] (stride 2: keys interleaved with
 * other per-entry fields). */
static inline uint64_t pos_find(const PosIndex *ix, const uint64_t *keys, uint64_t stride, uint64_t fp)
{
    uint64_t i = fmix64(fp) & ix->mask;
    uint32_t s;
    while ((s = ix->slots[i]) != 0) {
        if (keys[(s - 1) * stride] == fp)
            return i;
        i = (i + 1) & ix->mask;
    }
    return i;
}

static inline void pos_prefetch(const PosIndex *ix, uint64_t fp)
{
    __builtin_prefetch(&ix->slots[fmix64(fp) & ix->mask]);
}

static inline void pos_delete(PosIndex *ix, const uint64_t *keys, uint64_t stride, uint64_t i)
{
    const uint64_t mask = ix->mask;
    uint64_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        uint32_t s = ix->slots[j];
        if (s == 0)
            break;
        uint64_t k = fmix64(keys[(s - 1) * stride]) & mask;
        /* keep the entry at j if its home k lies cyclically in (i, j] */
        int stay = (i <= j) ? (i < k && k <= j) : (i < k || k <= j);
        if (!stay) {
            ix->slots[i] = s;
            i = j;
        }
    }
    ix->slots[i] = 0;
}

#endif
