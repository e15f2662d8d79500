/*
 * Compiled kernels of the URL cache policies (crawler/cache).
 *
 * Why C: the splitter and the DUE ask the cache once per link, and replay asks
 * it hundreds of millions of times.  A Python method costs ~100 ns before it
 * does anything; a METH_O method of a C type costs a few ns, and a batch loop
 * over a uint64 buffer costs nothing per element.  Everything here mirrors a
 * pure-Python kernel in the policy's own module (clock.py, lru.py, random_policy.py,
 * setkernel.py, min.py); tests check that both give identical results.
 *
 * No numpy C API: arrays come in through the buffer protocol (Py_buffer) and
 * the result arrays are made by calling numpy.empty, so only Python.h is
 * needed at build time.
 *
 * Types:
 *   ClockKernel(capacity, ways)    set-associative CLOCK (a CLOCK ring per set)
 *   LruKernel(capacity)            exact LRU: entries with list links + index
 *   RandomKernel(capacity, seed)   random victim from splitmix64
 *   SetKernel(capacity, insert)    hash set (infinite: inserts; static: frozen)
 * Functions:
 *   belady(next_use, capacity, out)  MIN's hit sequence, offline
 *   split_owners(...)                the host splitter's per-page owner pass
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <time.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

typedef unsigned __int128 u128;

/* Cached numpy callables (set once at module init). */
static PyObject *np_empty = NULL;
static PyObject *np_ascontiguousarray = NULL;
static PyObject *np_uint64 = NULL;
static PyObject *np_bool = NULL;
static PyObject *np_ndarray = NULL;       /* numpy.ndarray */
static PyObject *np_u64_dtype = NULL;     /* numpy.dtype(numpy.uint64): numpy keeps one, shared */
static PyObject *str_dtype = NULL;

/* ---------------------------------------------------------------- hashing */

/* MurmurHash3's 64-bit finalizer: a bijection of uint64 (so no two
 * fingerprints collide), fmix64(0) == 0. Same constants as _mix.py. */
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

/* ------------------------------------------------------- argument helpers */

/* One fingerprint from a Python int (or anything with __index__). */
static int fp_from_object(PyObject *obj, uint64_t *fp)
{
    if (PyLong_CheckExact(obj)) {
        unsigned long long v = PyLong_AsUnsignedLongLong(obj);
        if (v == (unsigned long long)-1 && PyErr_Occurred())
            return -1;
        *fp = (uint64_t)v;
        return 0;
    }
    PyObject *idx = PyNumber_Index(obj);
    if (idx == NULL)
        return -1;
    unsigned long long v = PyLong_AsUnsignedLongLong(idx);
    Py_DECREF(idx);
    if (v == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    *fp = (uint64_t)v;
    return 0;
}

static int is_u64_format(const char *f)
{
    if (f == NULL)
        return 0;
    if (*f == '@' || *f == '=' || *f == '<')
        f++;
    return (f[0] == 'Q' || f[0] == 'L') && f[1] == '\0';
}

/* A C-contiguous 1-d uint64 view of obj; converts through
 * numpy.ascontiguousarray(obj, dtype=uint64) when obj is not one already.
 * On success the caller releases view and decrefs *owner. */
static int get_u64_view(PyObject *obj, Py_buffer *view, PyObject **owner)
{
    *owner = NULL;
    /* A numpy array of numpy's own native uint64 dtype: checked by the dtype
     * object, because numpy builds the buffer's format string anew for every
     * view, and that cost more than the rest of a small batch's argument
     * handling (the DUE's hot path gets a fresh slice per page). */
    if (Py_TYPE(obj) == (PyTypeObject *)np_ndarray) {
        PyObject *dt = PyObject_GetAttr(obj, str_dtype);
        int same = dt == np_u64_dtype;
        Py_XDECREF(dt);
        if (same && PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS) == 0) {
            if (view->itemsize == 8 && view->ndim == 1)
                return 0;
            PyBuffer_Release(view);
        }
        PyErr_Clear();
    }
    if (PyObject_CheckBuffer(obj) &&
        PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) == 0) {
        if (view->itemsize == 8 && view->ndim == 1 && is_u64_format(view->format))
            return 0;
        PyBuffer_Release(view);
    }
    PyErr_Clear();
    PyObject *arr = PyObject_CallFunctionObjArgs(np_ascontiguousarray, obj, np_uint64, NULL);
    if (arr == NULL)
        return -1;
    if (PyObject_GetBuffer(arr, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        Py_DECREF(arr);
        return -1;
    }
    if (view->ndim != 1 || view->itemsize != 8) {
        PyBuffer_Release(view);
        Py_DECREF(arr);
        PyErr_SetString(PyExc_ValueError, "fingerprints must be a 1-d array of uint64");
        return -1;
    }
    *owner = arr;
    return 0;
}

/* A new numpy bool array of n elements and a writable pointer into it. */
static PyObject *new_bool_array(Py_ssize_t n, Py_buffer *out)
{
    PyObject *len = PyLong_FromSsize_t(n);
    if (len == NULL)
        return NULL;
    PyObject *arr = PyObject_CallFunctionObjArgs(np_empty, len, np_bool, NULL);
    Py_DECREF(len);
    if (arr == NULL)
        return NULL;
    if (PyObject_GetBuffer(arr, out, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        Py_DECREF(arr);
        return NULL;
    }
    return arr;
}

/* A large, randomly probed table (the CLOCK keys): its huge-page-aligned part
 * on 2 MiB pages where the kernel offers them (transparent huge pages, also in
 * "madvise" mode), so a probe costs no TLB miss.  A 2 MiB table on 4 KiB
 * pages needs 512 TLB entries, and the DUE's other traffic (URL strings,
 * journal) evicts them: huge pages made the DUE's checks 9-18% faster
 * (docs/due.md).  Zeroed; free with free_table(p, bytes). */
#define HUGE_PAGE ((size_t)2 << 20)
#define SMALL_PAGE ((size_t)4096)
#define TABLE_TRACE_DOMAIN 0x43524157u   /* tracemalloc domain of the mapped tables */

static size_t table_span(size_t bytes)
{
    return (bytes + SMALL_PAGE - 1) & ~(SMALL_PAGE - 1);
}

/* Bytes a table of `bytes` really holds (mapped ones are whole small pages). */
static size_t table_bytes(size_t bytes)
{
    return bytes < HUGE_PAGE ? bytes : table_span(bytes);
}

static void *alloc_table(size_t bytes)
{
    if (bytes < HUGE_PAGE) {
        void *small = PyMem_RawCalloc(bytes ? bytes : 1, 1);
        if (small == NULL)
            PyErr_NoMemory();
        return small;
    }
    size_t span = table_span(bytes), reserve = span + HUGE_PAGE;
    char *raw = mmap(NULL, reserve, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        PyErr_NoMemory();
        return NULL;
    }
    /* Keep the huge-page-aligned `span` bytes of the reservation; unmap both ends. */
    char *p = (char *)(((uintptr_t)raw + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    if (p > raw)
        munmap(raw, (size_t)(p - raw));
    if (raw + reserve > p + span)
        munmap(p + span, (size_t)(raw + reserve - (p + span)));
#ifdef MADV_HUGEPAGE
    madvise(p, bytes & ~(HUGE_PAGE - 1), MADV_HUGEPAGE);   /* advice: ignored where unsupported */
#endif
    PyTraceMalloc_Track(TABLE_TRACE_DOMAIN, (uintptr_t)p, span);   /* so tracemalloc counts it */
    return p;
}

static void free_table(void *p, size_t bytes)
{
    if (p == NULL)
        return;
    if (bytes < HUGE_PAGE) {
        PyMem_RawFree(p);
    } else {
        PyTraceMalloc_Untrack(TABLE_TRACE_DOMAIN, (uintptr_t)p);
        munmap(p, table_span(bytes));
    }
}

static void *alloc_zeroed(size_t count, size_t size)
{
    void *p = PyMem_RawCalloc(count ? count : 1, size);
    if (p == NULL)
        PyErr_NoMemory();
    return p;
}

#define NOT_READY(self) \
    (PyErr_SetString(PyExc_RuntimeError, "cache kernel used before __init__"), (PyObject *)NULL)

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

/* ============================================================ ClockKernel */
/*
 * Set-associative CLOCK.  The capacity is split into nsets = ceil(capacity /
 * ways) sets of `ways` (or ways - 1) entries; a fingerprint belongs to set
 * fastrange(fmix64(fp), nsets), and each set is the paper's CLOCK ring: a
 * key array in ring order, one mark bit per entry (a uint32 per set), a hand
 * and a fill count (a byte each per set).  Slots [0, fill) of a set are
 * occupied, so no value is reserved for "empty" and fingerprint 0 is an
 * ordinary key.  With capacity <= ways there is one set: the global CLOCK.
 * Memory: capacity * 8 + nsets * 6 bytes (8.19 bytes per entry at 32 ways).
 */
#define CLOCK_MAX_WAYS 32

typedef struct {
    PyObject_HEAD
    uint64_t *keys;   /* capacity fingerprints, set after set */
    uint32_t *marks;  /* per set: bit i = mark of way i */
    uint8_t *hands;   /* per set: the way the hand points at */
    uint8_t *fills;   /* per set: ways occupied (they fill from way 0 up) */
    uint64_t nsets;
    uint64_t base;    /* every set has base ways, the first `extra` one more */
    uint64_t extra;
    uint64_t ways;
    uint64_t capacity;
    uint64_t size;
    uint64_t hits;
    uint64_t misses;
} ClockObject;

/* A new entry starts unmarked (documented in clock.py and docs/caches.md). */
#define CLOCK_INITIAL_MARK 0

/* Where fingerprint fp's set lives: set number, first key, ways, fill. */
typedef struct {
    uint64_t b;
    uint64_t *keys;
    uint32_t ways;
    uint32_t fill;
} ClockSet;

static inline __attribute__((always_inline)) uint64_t clock_set_of(const ClockObject *c, uint64_t fp)
{
    return fastrange(fmix64(fp), c->nsets);
}

/* First key of set b (the first `extra` sets have one way more). */
static inline __attribute__((always_inline)) uint64_t *clock_set_keys(const ClockObject *c, uint64_t b)
{
    return c->keys + b * c->base + (b < c->extra ? b : c->extra);
}

static inline __attribute__((always_inline)) ClockSet clock_set(const ClockObject *c, uint64_t b)
{
    ClockSet s;
    s.b = b;
    s.keys = clock_set_keys(c, b);
    s.ways = (uint32_t)(c->base + (s.b < c->extra));
    s.fill = c->fills[s.b];
    return s;
}

/* The rest of a request once the lookup has found `found` (bit i = way i holds
 * fp; 0 = a miss).  Returns 1 on a hit. */
static inline __attribute__((always_inline)) int clock_finish(ClockObject *c, ClockSet s, uint64_t fp, uint32_t found)
{
    const uint64_t b = s.b;
    const uint32_t ways = s.ways, fill = s.fill;
    uint64_t *keys = s.keys;
    if (found) {
        c->marks[b] |= found;
        c->hits++;
        return 1;
    }
    c->misses++;
    if (fill < ways) { /* the set is not full: a miss simply inserts */
        c->size++;
        keys[fill] = fp;
        c->marks[b] = (c->marks[b] & ~(1u << fill)) | ((uint32_t)CLOCK_INITIAL_MARK << fill);
        c->fills[b] = (uint8_t)(fill + 1);
        return 0;
    }
    /* Full: move the hand, clearing marks, to the first unmarked way. */
    const uint32_t all = ways == 32 ? 0xFFFFFFFFu : ((1u << ways) - 1);
    const uint32_t hand = c->hands[b];
    const uint32_t from_hand = all & ~((1u << hand) - 1);
    uint32_t m = c->marks[b];
    uint32_t unmarked = ~m & all, victim;
    if (unmarked == 0) {                       /* a whole lap clears every mark */
        victim = hand;
        m = 0;
    } else if (unmarked & from_hand) {         /* victim at or after the hand */
        victim = (uint32_t)__builtin_ctz(unmarked & from_hand);
        m &= ~(from_hand & ((1u << victim) - 1));
    } else {                                   /* the hand wraps past the last way */
        victim = (uint32_t)__builtin_ctz(unmarked);
        m &= ~from_hand & ~((1u << victim) - 1);
    }
    keys[victim] = fp;
    m = (m & ~(1u << victim)) | ((uint32_t)CLOCK_INITIAL_MARK << victim);
    c->marks[b] = m;
    c->hands[b] = (uint8_t)(victim + 1 == ways ? 0 : victim + 1);
    return 0;
}

/* Hot path: one request to set b (= clock_set_of(fp)), scalar lookup (stops
 * at the first match). Returns 1 on a hit. */
static inline int clock_access_at(ClockObject *c, uint64_t b, uint64_t fp)
{
    const ClockSet s = clock_set(c, b);
    uint32_t found = 0;
    for (uint32_t i = 0; i < s.fill; i++) {
        if (s.keys[i] == fp) {
            found = 1u << i;
            break;
        }
    }
    return clock_finish(c, s, fp, found);
}

static inline int clock_access(ClockObject *c, uint64_t fp)
{
    return clock_access_at(c, clock_set_of(c, fp), fp);
}

static inline __attribute__((always_inline)) void clock_prefetch_set(const ClockObject *c, uint64_t b)
{
    const uint64_t *keys = clock_set_keys(c, b);
    __builtin_prefetch(keys);
    __builtin_prefetch(keys + 8);
    __builtin_prefetch(keys + 16);
    __builtin_prefetch(keys + 24);
}

/* CLOCK's batch loop: DEFINE_LOOP's prefetching, with each request's set
 * number computed once (kept in a ring from its prefetch to its access). */
#define CLOCK_RING 16   /* a power of two > PREFETCH_AHEAD */
#define DEFINE_CLOCK_LOOP(NAME, ACCESS_AT)                                       \
    static void NAME(ClockObject *self, const uint64_t *src, uint8_t *dst, Py_ssize_t n) \
    {                                                                          \
        uint64_t ring[CLOCK_RING];                                             \
        for (Py_ssize_t i = 0; i < n && i < PREFETCH_AHEAD; i++) {             \
            ring[i] = clock_set_of(self, src[i]);                              \
            clock_prefetch_set(self, ring[i]);                                 \
        }                                                                      \
        for (Py_ssize_t i = 0; i < n; i++) {                                   \
            if (i + PREFETCH_AHEAD < n) {                                      \
                const uint64_t ahead = clock_set_of(self, src[i + PREFETCH_AHEAD]); \
                ring[(i + PREFETCH_AHEAD) & (CLOCK_RING - 1)] = ahead;         \
                clock_prefetch_set(self, ahead);                               \
            }                                                                  \
            dst[i] = (uint8_t)ACCESS_AT(self, ring[i & (CLOCK_RING - 1)], src[i]); \
        }                                                                      \
    }

DEFINE_CLOCK_LOOP(clock_loop_scalar, clock_access_at)

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
/* The same request with the 32 ways compared at once: eight 4-lane compares,
 * each folded to 4 bits by a movemask, no branch.  The keys array has
 * CLOCK_MAX_WAYS entries of padding so the last set can be read whole; ways
 * past the fill count are masked off.  (The plain C version of this loop
 * compiled to ~70 shuffle instructions; this is ~25.) */
static inline __attribute__((target("avx2"), always_inline)) int clock_access_avx2(ClockObject *c, uint64_t b,
                                                                                  uint64_t fp)
{
    const ClockSet s = clock_set(c, b);
    const __m256i want = _mm256_set1_epi64x((long long)fp);
    uint32_t found = 0;
    for (int q = 0; q < CLOCK_MAX_WAYS / 4; q++) {
        const __m256i k = _mm256_loadu_si256((const __m256i *)(s.keys + 4 * q));
        found |= (uint32_t)_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpeq_epi64(k, want))) << (4 * q);
    }
    found &= s.fill == 32 ? 0xFFFFFFFFu : ((1u << s.fill) - 1);
    return clock_finish(c, s, fp, found);
}
__attribute__((target("avx2"))) DEFINE_CLOCK_LOOP(clock_loop_avx2, clock_access_avx2)
static int have_avx2 = 0; /* set once at module init */
static void clock_loop(ClockObject *self, const uint64_t *src, uint8_t *dst, Py_ssize_t n)
{
    if (have_avx2)
        clock_loop_avx2(self, src, dst, n);
    else
        clock_loop_scalar(self, src, dst, n);
}
#define DETECT_CPU() (__builtin_cpu_init(), have_avx2 = __builtin_cpu_supports("avx2"))
#else
#define clock_loop clock_loop_scalar
#define DETECT_CPU() ((void)0)
#endif

static int Clock_init(ClockObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"capacity", "ways", NULL};
    unsigned long long capacity, ways;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "KK", kwlist, &capacity, &ways))
        return -1;
    if (self->keys != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "ClockKernel is already initialised");
        return -1;
    }
    if (capacity < 1 || capacity >= (1ULL << 40) || ways < 1 || ways > CLOCK_MAX_WAYS) {
        PyErr_SetString(PyExc_ValueError, "ClockKernel needs 1 <= capacity < 2**40 and 1 <= ways <= 32");
        return -1;
    }
    uint64_t nsets = (capacity + ways - 1) / ways;
    self->keys = alloc_table((size_t)(capacity + CLOCK_MAX_WAYS) * 8); /* + padding, see clock_access_avx2 */
    self->marks = alloc_zeroed((size_t)nsets, 4);
    self->hands = alloc_zeroed((size_t)nsets, 1);
    self->fills = alloc_zeroed((size_t)nsets, 1);
    if (!self->keys || !self->marks || !self->hands || !self->fills) {
        free_table(self->keys, (size_t)(capacity + CLOCK_MAX_WAYS) * 8);
        PyMem_RawFree(self->marks);
        PyMem_RawFree(self->hands);
        PyMem_RawFree(self->fills);
        self->keys = NULL;
        return -1;
    }
    self->nsets = nsets;
    self->base = capacity / nsets;
    self->extra = capacity % nsets;
    self->ways = ways;
    self->capacity = capacity;
    self->size = self->hits = self->misses = 0;
    return 0;
}

static void Clock_dealloc(ClockObject *self)
{
    free_table(self->keys, (size_t)(self->capacity + CLOCK_MAX_WAYS) * 8);
    PyMem_RawFree(self->marks);
    PyMem_RawFree(self->hands);
    PyMem_RawFree(self->fills);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

DEFINE_SINGLE(Clock_check_and_add, ClockObject, clock_access, self->keys != NULL)
DEFINE_BATCH(Clock_check_and_add_many, ClockObject, clock_loop, self->keys != NULL)

/* The state of one set: (keys in ring order, marks, hand). */
static PyObject *Clock_set_state(ClockObject *self, PyObject *arg)
{
    if (self->keys == NULL)
        return NOT_READY(self);
    unsigned long long b = PyLong_AsUnsignedLongLong(arg);
    if (b == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    if (b >= self->nsets) {
        PyErr_SetString(PyExc_IndexError, "no such set");
        return NULL;
    }
    uint64_t start = b * self->base + (b < self->extra ? b : self->extra);
    uint32_t fill = self->fills[b];
    PyObject *keys = PyList_New(fill), *marks = PyList_New(fill);
    if (keys == NULL || marks == NULL) {
        Py_XDECREF(keys);
        Py_XDECREF(marks);
        return NULL;
    }
    for (uint32_t i = 0; i < fill; i++) {
        PyObject *v = PyLong_FromUnsignedLongLong(self->keys[start + i]);
        if (v == NULL) {
            Py_DECREF(keys);
            Py_DECREF(marks);
            return NULL;
        }
        PyList_SET_ITEM(keys, i, v);
        PyObject *mk = ((self->marks[b] >> i) & 1) ? Py_True : Py_False;
        Py_INCREF(mk);
        PyList_SET_ITEM(marks, i, mk);
    }
    return Py_BuildValue("(NNi)", keys, marks, (int)self->hands[b]);
}

/* Resident fingerprints, set by set, each set in ring order from way 0. */
static PyObject *Clock_keys(ClockObject *self, PyObject *Py_UNUSED(ignored))
{
    if (self->keys == NULL)
        return NOT_READY(self);
    PyObject *list = PyList_New((Py_ssize_t)self->size);
    if (list == NULL)
        return NULL;
    Py_ssize_t k = 0;
    for (uint64_t b = 0; b < self->nsets; b++) {
        uint64_t start = b * self->base + (b < self->extra ? b : self->extra);
        for (uint32_t i = 0; i < self->fills[b]; i++) {
            PyObject *v = PyLong_FromUnsignedLongLong(self->keys[start + i]);
            if (v == NULL) {
                Py_DECREF(list);
                return NULL;
            }
            PyList_SET_ITEM(list, k++, v);
        }
    }
    return list;
}

static PyObject *Clock_get_buffer_bytes(ClockObject *self, void *Py_UNUSED(c))
{
    return PyLong_FromUnsignedLongLong(table_bytes((size_t)(self->capacity + CLOCK_MAX_WAYS) * 8)
                                       + self->nsets * (4 + 1 + 1));
}

#define U64_GETTER(FN, TYPE, FIELD) \
    static PyObject *FN(TYPE *self, void *Py_UNUSED(c)) { return PyLong_FromUnsignedLongLong(self->FIELD); }

U64_GETTER(Clock_get_capacity, ClockObject, capacity)
U64_GETTER(Clock_get_size, ClockObject, size)
U64_GETTER(Clock_get_hits, ClockObject, hits)
U64_GETTER(Clock_get_misses, ClockObject, misses)
U64_GETTER(Clock_get_nsets, ClockObject, nsets)
U64_GETTER(Clock_get_ways, ClockObject, ways)

static PyMethodDef Clock_methods[] = {
    {"check_and_add", (PyCFunction)Clock_check_and_add, METH_O,
     "check_and_add(fp) -> bool: True if fp is cached (a hit); a miss inserts fp."},
    {"check_and_add_many", (PyCFunction)Clock_check_and_add_many, METH_O,
     "check_and_add_many(fps) -> bool array: check_and_add on each element, in order."},
    {"keys", (PyCFunction)Clock_keys, METH_NOARGS, "Resident fingerprints, set by set in ring order."},
    {"set_state", (PyCFunction)Clock_set_state, METH_O, "set_state(b) -> (keys, marks, hand) of set b."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Clock_getset[] = {
    {"capacity", (getter)Clock_get_capacity, NULL, "Most entries held.", NULL},
    {"size", (getter)Clock_get_size, NULL, "Entries held now.", NULL},
    {"hits", (getter)Clock_get_hits, NULL, "Requests that found their fingerprint.", NULL},
    {"misses", (getter)Clock_get_misses, NULL, "Requests that did not.", NULL},
    {"nsets", (getter)Clock_get_nsets, NULL, "Number of sets (CLOCK rings).", NULL},
    {"ways", (getter)Clock_get_ways, NULL, "Most entries per set.", NULL},
    {"buffer_bytes", (getter)Clock_get_buffer_bytes, NULL, "Bytes of the heap arrays.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject ClockType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "crawler.cache._ckernel.ClockKernel",
    .tp_basicsize = sizeof(ClockObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Set-associative CLOCK (see clock.py).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Clock_init,
    .tp_dealloc = (destructor)Clock_dealloc,
    .tp_methods = Clock_methods,
    .tp_getset = Clock_getset,
};

/* ======================================================= position index */
/*
 * Open-addressing table (linear probing, power-of-two size) mapping a
 * fingerprint to its position in a key array: slots hold position + 1, 0 is
 * empty, and a probe compares keys[pos] with the fingerprint.  Deletion by
 * backward shift (Knuth 6.4 Algorithm R), so there are no tombstones.
 * Used by LRU and RANDOM, whose key arrays are in policy order.
 */
typedef struct {
    uint32_t *slots;
    uint64_t mask;
} PosIndex;

static uint64_t pos_index_size(uint64_t capacity)
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

/* ============================================================== LruKernel */
/* One entry: the key and its list links, in one 16-byte record so that a
 * hit touches one cache line for the entry itself. */
typedef struct {
    uint64_t key;
    uint32_t prev;
    uint32_t next;
} LruEntry;

typedef struct {
    PyObject_HEAD
    LruEntry *e;
    PosIndex index;
    uint64_t capacity;
    uint64_t size;
    uint64_t hits;
    uint64_t misses;
    uint32_t head; /* most recently used; e[head].prev is the least */
} LruObject;

#define LRU_KEYS(c) ((const uint64_t *)(c)->e)
#define LRU_STRIDE (sizeof(LruEntry) / sizeof(uint64_t))

static inline void lru_unlink(LruObject *c, uint32_t p)
{
    LruEntry *e = c->e;
    e[e[p].prev].next = e[p].next;
    e[e[p].next].prev = e[p].prev;
}

/* Link p just before head (the least recently used end) and make it head. */
static inline void lru_push_front(LruObject *c, uint32_t p)
{
    LruEntry *e = c->e;
    uint32_t h = c->head, t = e[h].prev;
    e[p].prev = t;
    e[p].next = h;
    e[t].next = p;
    e[h].prev = p;
    c->head = p;
}

static inline int lru_access(LruObject *c, uint64_t fp)
{
    uint64_t i = pos_find(&c->index, LRU_KEYS(c), LRU_STRIDE, fp);
    uint32_t s = c->index.slots[i];
    if (s != 0) {
        uint32_t p = s - 1;
        if (p != c->head) {
            lru_unlink(c, p);
            lru_push_front(c, p);
        }
        c->hits++;
        return 1;
    }
    c->misses++;
    if (c->size < c->capacity) {
        uint32_t p = (uint32_t)c->size++;
        c->e[p].key = fp;
        c->index.slots[i] = p + 1;
        if (p == 0) {
            c->e[0].prev = c->e[0].next = 0;
            c->head = 0;
        } else {
            lru_push_front(c, p);
        }
        return 0;
    }
    /* Full: the least recently used entry's position takes fp; in a circular
     * list making the tail the head is one step of the head pointer. */
    uint32_t p = c->e[c->head].prev;
    pos_delete(&c->index, LRU_KEYS(c), LRU_STRIDE, pos_find(&c->index, LRU_KEYS(c), LRU_STRIDE, c->e[p].key));
    c->e[p].key = fp;
    c->index.slots[pos_find(&c->index, LRU_KEYS(c), LRU_STRIDE, fp)] = p + 1;
    c->head = p;
    return 0;
}

static int Lru_init(LruObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"capacity", NULL};
    unsigned long long capacity;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "K", kwlist, &capacity))
        return -1;
    if (self->e != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "LruKernel is already initialised");
        return -1;
    }
    if (capacity < 1 || capacity >= (1ULL << 31)) {
        PyErr_SetString(PyExc_ValueError, "LruKernel needs 1 <= capacity < 2**31");
        return -1;
    }
    uint64_t m = pos_index_size(capacity);
    self->e = alloc_zeroed((size_t)capacity, sizeof(LruEntry));
    self->index.slots = alloc_zeroed((size_t)m, 4);
    if (!self->e || !self->index.slots) {
        PyMem_RawFree(self->e);
        PyMem_RawFree(self->index.slots);
        self->e = NULL;
        return -1;
    }
    self->index.mask = m - 1;
    self->capacity = capacity;
    self->size = self->hits = self->misses = 0;
    self->head = 0;
    return 0;
}

static void Lru_dealloc(LruObject *self)
{
    PyMem_RawFree(self->e);
    PyMem_RawFree(self->index.slots);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

DEFINE_SINGLE(Lru_check_and_add, LruObject, lru_access, self->e != NULL)
#define lru_prefetch(c, fp) pos_prefetch(&(c)->index, (fp))
DEFINE_LOOP(lru_loop, LruObject, lru_access, lru_prefetch)
DEFINE_BATCH(Lru_check_and_add_many, LruObject, lru_loop, self->e != NULL)

/* Resident fingerprints from least to most recently used. */
static PyObject *Lru_keys(LruObject *self, PyObject *Py_UNUSED(ignored))
{
    if (self->e == NULL)
        return NOT_READY(self);
    PyObject *list = PyList_New((Py_ssize_t)self->size);
    if (list == NULL || self->size == 0)
        return list;
    uint32_t p = self->e[self->head].prev; /* the least recently used */
    for (uint64_t k = 0; k < self->size; k++) {
        PyObject *v = PyLong_FromUnsignedLongLong(self->e[p].key);
        if (v == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)k, v);
        p = self->e[p].prev; /* prev runs from the tail towards the head */
    }
    return list;
}

static PyObject *Lru_get_buffer_bytes(LruObject *self, void *Py_UNUSED(c))
{
    return PyLong_FromUnsignedLongLong(self->capacity * sizeof(LruEntry) + (self->index.mask + 1) * 4);
}

U64_GETTER(Lru_get_capacity, LruObject, capacity)
U64_GETTER(Lru_get_size, LruObject, size)
U64_GETTER(Lru_get_hits, LruObject, hits)
U64_GETTER(Lru_get_misses, LruObject, misses)

static PyMethodDef Lru_methods[] = {
    {"check_and_add", (PyCFunction)Lru_check_and_add, METH_O,
     "check_and_add(fp) -> bool: True if fp is cached (a hit); a miss inserts fp."},
    {"check_and_add_many", (PyCFunction)Lru_check_and_add_many, METH_O,
     "check_and_add_many(fps) -> bool array: check_and_add on each element, in order."},
    {"keys", (PyCFunction)Lru_keys, METH_NOARGS, "Resident fingerprints, least recently used first."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Lru_getset[] = {
    {"capacity", (getter)Lru_get_capacity, NULL, "Most entries held.", NULL},
    {"size", (getter)Lru_get_size, NULL, "Entries held now.", NULL},
    {"hits", (getter)Lru_get_hits, NULL, "Requests that found their fingerprint.", NULL},
    {"misses", (getter)Lru_get_misses, NULL, "Requests that did not.", NULL},
    {"buffer_bytes", (getter)Lru_get_buffer_bytes, NULL, "Bytes of the heap arrays.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject LruType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "crawler.cache._ckernel.LruKernel",
    .tp_basicsize = sizeof(LruObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Exact LRU: key array, circular doubly linked list, position index.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Lru_init,
    .tp_dealloc = (destructor)Lru_dealloc,
    .tp_methods = Lru_methods,
    .tp_getset = Lru_getset,
};

/* =========================================================== RandomKernel */
typedef struct {
    PyObject_HEAD
    uint64_t *keys;
    PosIndex index;
    uint64_t capacity;
    uint64_t size;
    uint64_t hits;
    uint64_t misses;
    uint64_t state; /* splitmix64 state */
} RandomObject;

static inline int random_access(RandomObject *c, uint64_t fp)
{
    uint64_t i = pos_find(&c->index, c->keys, 1, fp);
    if (c->index.slots[i] != 0) {
        c->hits++;
        return 1;
    }
    c->misses++;
    if (c->size < c->capacity) {
        uint64_t p = c->size++;
        c->keys[p] = fp;
        c->index.slots[i] = (uint32_t)(p + 1);
        return 0;
    }
    uint64_t p = fastrange(splitmix64(&c->state), c->capacity);
    pos_delete(&c->index, c->keys, 1, pos_find(&c->index, c->keys, 1, c->keys[p]));
    c->keys[p] = fp;
    c->index.slots[pos_find(&c->index, c->keys, 1, fp)] = (uint32_t)(p + 1);
    return 0;
}

static int Random_init(RandomObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"capacity", "seed", NULL};
    unsigned long long capacity, seed = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "K|K", kwlist, &capacity, &seed))
        return -1;
    if (self->keys != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "RandomKernel is already initialised");
        return -1;
    }
    if (capacity < 1 || capacity >= (1ULL << 31)) {
        PyErr_SetString(PyExc_ValueError, "RandomKernel needs 1 <= capacity < 2**31");
        return -1;
    }
    uint64_t m = pos_index_size(capacity);
    self->keys = alloc_zeroed((size_t)capacity, 8);
    self->index.slots = alloc_zeroed((size_t)m, 4);
    if (!self->keys || !self->index.slots) {
        PyMem_RawFree(self->keys);
        PyMem_RawFree(self->index.slots);
        self->keys = NULL;
        return -1;
    }
    self->index.mask = m - 1;
    self->capacity = capacity;
    self->size = self->hits = self->misses = 0;
    self->state = seed;
    return 0;
}

static void Random_dealloc(RandomObject *self)
{
    PyMem_RawFree(self->keys);
    PyMem_RawFree(self->index.slots);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

DEFINE_SINGLE(Random_check_and_add, RandomObject, random_access, self->keys != NULL)
#define random_prefetch(c, fp) pos_prefetch(&(c)->index, (fp))
DEFINE_LOOP(random_loop, RandomObject, random_access, random_prefetch)
DEFINE_BATCH(Random_check_and_add_many, RandomObject, random_loop, self->keys != NULL)

/* Resident fingerprints by position. */
static PyObject *Random_keys(RandomObject *self, PyObject *Py_UNUSED(ignored))
{
    if (self->keys == NULL)
        return NOT_READY(self);
    PyObject *list = PyList_New((Py_ssize_t)self->size);
    if (list == NULL)
        return NULL;
    for (uint64_t k = 0; k < self->size; k++) {
        PyObject *v = PyLong_FromUnsignedLongLong(self->keys[k]);
        if (v == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)k, v);
    }
    return list;
}

static PyObject *Random_get_buffer_bytes(RandomObject *self, void *Py_UNUSED(c))
{
    return PyLong_FromUnsignedLongLong(self->capacity * 8 + (self->index.mask + 1) * 4);
}

U64_GETTER(Random_get_capacity, RandomObject, capacity)
U64_GETTER(Random_get_size, RandomObject, size)
U64_GETTER(Random_get_hits, RandomObject, hits)
U64_GETTER(Random_get_misses, RandomObject, misses)

static PyMethodDef Random_methods[] = {
    {"check_and_add", (PyCFunction)Random_check_and_add, METH_O,
     "check_and_add(fp) -> bool: True if fp is cached (a hit); a miss inserts fp."},
    {"check_and_add_many", (PyCFunction)Random_check_and_add_many, METH_O,
     "check_and_add_many(fps) -> bool array: check_and_add on each element, in order."},
    {"keys", (PyCFunction)Random_keys, METH_NOARGS, "Resident fingerprints by position."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Random_getset[] = {
    {"capacity", (getter)Random_get_capacity, NULL, "Most entries held.", NULL},
    {"size", (getter)Random_get_size, NULL, "Entries held now.", NULL},
    {"hits", (getter)Random_get_hits, NULL, "Requests that found their fingerprint.", NULL},
    {"misses", (getter)Random_get_misses, NULL, "Requests that did not.", NULL},
    {"buffer_bytes", (getter)Random_get_buffer_bytes, NULL, "Bytes of the heap arrays.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject RandomType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "crawler.cache._ckernel.RandomKernel",
    .tp_basicsize = sizeof(RandomObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Random replacement driven by splitmix64 (see random_policy.py).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Random_init,
    .tp_dealloc = (destructor)Random_dealloc,
    .tp_methods = Random_methods,
    .tp_getset = Random_getset,
};

/* ============================================================== SetKernel */
/*
 * A growable hash set of fingerprints (linear probing, power-of-two size,
 * load <= 1/2, slot value 0 = empty, the fingerprint 0 kept in a flag).
 * insert=True: every miss inserts (INFINITE).  insert=False: membership only,
 * filled once with add_many (STATIC).
 */
typedef struct {
    PyObject_HEAD
    uint64_t *table;
    uint64_t mask;
    uint64_t count; /* nonzero fingerprints in table */
    int has_zero;
    int insert;
    uint64_t capacity;
    uint64_t hits;
    uint64_t misses;
} SetObject;

static inline uint64_t set_find(const SetObject *c, uint64_t fp)
{
    uint64_t i = fmix64(fp) & c->mask, k;
    while ((k = c->table[i]) != 0 && k != fp)
        i = (i + 1) & c->mask;
    return i;
}

static int set_grow(SetObject *c)
{
    uint64_t newsize = (c->mask + 1) * 2;
    uint64_t *old = c->table, oldsize = c->mask + 1;
    uint64_t *table = PyMem_RawCalloc((size_t)newsize, 8);
    if (table == NULL)
        return -1;
    c->table = table;
    c->mask = newsize - 1;
    for (uint64_t i = 0; i < oldsize; i++)
        if (old[i] != 0)
            c->table[set_find(c, old[i])] = old[i];
    PyMem_RawFree(old);
    return 0;
}

/* Returns 1 if present; else 0 after inserting; -1 if out of memory. */
static inline int set_add(SetObject *c, uint64_t fp)
{
    if (fp == 0) {
        if (c->has_zero)
            return 1;
        c->has_zero = 1;
        return 0;
    }
    uint64_t i = set_find(c, fp);
    if (c->table[i] == fp)
        return 1;
    c->table[i] = fp;
    c->count++;
    if (2 * c->count > c->mask + 1 && set_grow(c) < 0)
        return -1;
    return 0;
}

static inline int set_contains(const SetObject *c, uint64_t fp)
{
    if (fp == 0)
        return c->has_zero;
    return c->table[set_find(c, fp)] == fp;
}

/* Hot path.  Growth failure (out of memory) is reported as a miss; the
 * single and batch entry points check PyErr_Occurred afterwards. */
static inline int set_access(SetObject *c, uint64_t fp)
{
    int hit = c->insert ? set_add(c, fp) : set_contains(c, fp);
    if (hit == 1) {
        c->hits++;
        return 1;
    }
    if (hit < 0)
        PyErr_NoMemory();
    c->misses++;
    return 0;
}

static int Set_init(SetObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"capacity", "insert", NULL};
    unsigned long long capacity;
    int insert;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "Kp", kwlist, &capacity, &insert))
        return -1;
    if (self->table != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "SetKernel is already initialised");
        return -1;
    }
    self->table = alloc_zeroed(16, 8);
    if (self->table == NULL)
        return -1;
    self->mask = 15;
    self->count = 0;
    self->has_zero = 0;
    self->insert = insert;
    self->capacity = capacity;
    self->hits = self->misses = 0;
    return 0;
}

static void Set_dealloc(SetObject *self)
{
    PyMem_RawFree(self->table);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Set_check_and_add(SetObject *self, PyObject *arg)
{
    uint64_t fp;
    if (self->table == NULL)
        return NOT_READY(self);
    if (fp_from_object(arg, &fp) < 0)
        return NULL;
    int hit = set_access(self, fp);
    if (PyErr_Occurred())
        return NULL;
    if (hit)
        Py_RETURN_TRUE;
    Py_RETURN_FALSE;
}

#define set_prefetch(c, fp) __builtin_prefetch(&(c)->table[fmix64(fp) & (c)->mask])
DEFINE_LOOP(set_loop, SetObject, set_access, set_prefetch)
DEFINE_BATCH(Set_check_and_add_many_raw, SetObject, set_loop, self->table != NULL)

static PyObject *Set_check_and_add_many(SetObject *self, PyObject *fps)
{
    PyObject *r = Set_check_and_add_many_raw(self, fps);
    if (r != NULL && PyErr_Occurred()) {
        Py_DECREF(r);
        return NULL;
    }
    return r;
}

/* Add fingerprints without counting hits or misses (the static preload). */
static PyObject *Set_add_many(SetObject *self, PyObject *fps)
{
    if (self->table == NULL)
        return NOT_READY(self);
    Py_buffer in;
    PyObject *owner;
    if (get_u64_view(fps, &in, &owner) < 0)
        return NULL;
    const uint64_t *src = (const uint64_t *)in.buf;
    Py_ssize_t n = in.len / 8;
    int failed = 0;
    for (Py_ssize_t i = 0; i < n && !failed; i++)
        failed = set_add(self, src[i]) < 0;
    PyBuffer_Release(&in);
    Py_XDECREF(owner);
    if (failed)
        return PyErr_NoMemory();
    Py_RETURN_NONE;
}

static PyObject *Set_keys(SetObject *self, PyObject *Py_UNUSED(ignored))
{
    if (self->table == NULL)
        return NOT_READY(self);
    PyObject *list = PyList_New(0);
    if (list == NULL)
        return NULL;
    if (self->has_zero) {
        PyObject *z = PyLong_FromLong(0);
        if (z == NULL || PyList_Append(list, z) < 0) {
            Py_XDECREF(z);
            Py_DECREF(list);
            return NULL;
        }
        Py_DECREF(z);
    }
    for (uint64_t i = 0; i <= self->mask; i++) {
        if (self->table[i] == 0)
            continue;
        PyObject *v = PyLong_FromUnsignedLongLong(self->table[i]);
        if (v == NULL || PyList_Append(list, v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(list);
            return NULL;
        }
        Py_DECREF(v);
    }
    return list;
}

static PyObject *Set_get_size(SetObject *self, void *Py_UNUSED(c))
{
    return PyLong_FromUnsignedLongLong(self->count + (self->has_zero ? 1 : 0));
}

static PyObject *Set_get_buffer_bytes(SetObject *self, void *Py_UNUSED(c))
{
    return PyLong_FromUnsignedLongLong((self->mask + 1) * 8);
}

U64_GETTER(Set_get_capacity, SetObject, capacity)
U64_GETTER(Set_get_hits, SetObject, hits)
U64_GETTER(Set_get_misses, SetObject, misses)

static PyMethodDef Set_methods[] = {
    {"check_and_add", (PyCFunction)Set_check_and_add, METH_O,
     "check_and_add(fp) -> bool: True if fp is in the set; a miss inserts fp unless frozen."},
    {"check_and_add_many", (PyCFunction)Set_check_and_add_many, METH_O,
     "check_and_add_many(fps) -> bool array: check_and_add on each element, in order."},
    {"add_many", (PyCFunction)Set_add_many, METH_O, "Add fingerprints without counting them."},
    {"keys", (PyCFunction)Set_keys, METH_NOARGS, "Resident fingerprints (0 first, then table order)."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Set_getset[] = {
    {"capacity", (getter)Set_get_capacity, NULL, "The capacity given at construction.", NULL},
    {"size", (getter)Set_get_size, NULL, "Fingerprints held now.", NULL},
    {"hits", (getter)Set_get_hits, NULL, "Requests that found their fingerprint.", NULL},
    {"misses", (getter)Set_get_misses, NULL, "Requests that did not.", NULL},
    {"buffer_bytes", (getter)Set_get_buffer_bytes, NULL, "Bytes of the heap arrays.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject SetType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "crawler.cache._ckernel.SetKernel",
    .tp_basicsize = sizeof(SetObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Growable hash set of fingerprints (INFINITE, STATIC).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Set_init,
    .tp_dealloc = (destructor)Set_dealloc,
    .tp_methods = Set_methods,
    .tp_getset = Set_getset,
};

/* ================================================================= belady */
/*
 * MIN's hit sequence for a whole trace, given next_use[t] (the next time the
 * fingerprint of request t is requested, or n when never).  A resident entry
 * is represented by the time of its next request; "never again" entries get
 * distinct values n + t so that every value is unique.  resident[t] says that
 * some entry will be requested (and found) at time t.  A max-heap of next
 * request times finds the entry requested farthest in the future.  Stale
 * heap values (times already passed) are always below live ones, so they are
 * never popped; the heap is compacted when they pile up.
 */
static void heap_push(int64_t *heap, Py_ssize_t *len, int64_t v)
{
    Py_ssize_t i = (*len)++;
    while (i > 0) {
        Py_ssize_t parent = (i - 1) / 2;
        if (heap[parent] >= v)
            break;
        heap[i] = heap[parent];
        i = parent;
    }
    heap[i] = v;
}

static int64_t heap_pop(int64_t *heap, Py_ssize_t *len)
{
    int64_t top = heap[0], v = heap[--(*len)];
    Py_ssize_t i = 0, n = *len;
    for (;;) {
        Py_ssize_t child = 2 * i + 1;
        if (child >= n)
            break;
        if (child + 1 < n && heap[child + 1] > heap[child])
            child++;
        if (heap[child] <= v)
            break;
        heap[i] = heap[child];
        i = child;
    }
    if (n > 0)
        heap[i] = v;
    return top;
}

static void heap_rebuild(int64_t *heap, Py_ssize_t *len, int64_t keep_above)
{
    Py_ssize_t n = *len, k = 0;
    *len = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t v = heap[i];
        if (v > keep_above)
            heap[k++] = v;
    }
    for (Py_ssize_t i = 0; i < k; i++)
        heap_push(heap, len, heap[i]);
}

static PyObject *belady(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *next_obj, *out_obj;
    unsigned long long capacity;
    if (!PyArg_ParseTuple(args, "OKO", &next_obj, &capacity, &out_obj))
        return NULL;
    if (capacity < 1) {
        PyErr_SetString(PyExc_ValueError, "capacity must be >= 1");
        return NULL;
    }
    Py_buffer nx, out;
    if (PyObject_GetBuffer(next_obj, &nx, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return NULL;
    if (nx.itemsize != 8 || nx.ndim != 1) {
        PyBuffer_Release(&nx);
        PyErr_SetString(PyExc_ValueError, "next_use must be a 1-d int64 array");
        return NULL;
    }
    if (PyObject_GetBuffer(out_obj, &out, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&nx);
        return NULL;
    }
    Py_ssize_t n = nx.len / 8;
    if (out.len != n) {
        PyBuffer_Release(&nx);
        PyBuffer_Release(&out);
        PyErr_SetString(PyExc_ValueError, "out must have one byte per request");
        return NULL;
    }
    const int64_t *next_use = (const int64_t *)nx.buf;
    uint8_t *hit = (uint8_t *)out.buf;
    Py_ssize_t cap = (Py_ssize_t)(capacity < (unsigned long long)n ? capacity : (unsigned long long)n);
    Py_ssize_t heap_max = 2 * cap + 2, heap_len = 0;
    int64_t *heap = PyMem_RawMalloc((size_t)(heap_max + 1) * 8);
    uint8_t *resident = PyMem_RawCalloc((size_t)(n ? n : 1), 1);
    if (heap == NULL || resident == NULL) {
        PyMem_RawFree(heap);
        PyMem_RawFree(resident);
        PyBuffer_Release(&nx);
        PyBuffer_Release(&out);
        return PyErr_NoMemory();
    }
    Py_ssize_t live = 0;
    for (Py_ssize_t t = 0; t < n; t++) {
        int64_t nu = next_use[t];
        int64_t v = nu < n ? nu : (int64_t)n + t;
        if (resident[t]) {
            hit[t] = 1;
            resident[t] = 0; /* its heap value t is now stale */
        } else {
            hit[t] = 0;
            if ((unsigned long long)live == capacity) {
                int64_t victim = heap_pop(heap, &heap_len);
                if (victim < n)
                    resident[victim] = 0;
                live--;
            }
            live++;
        }
        if (nu < n)
            resident[nu] = 1;
        if (heap_len >= heap_max)
            heap_rebuild(heap, &heap_len, t);
        heap_push(heap, &heap_len, v);
    }
    PyMem_RawFree(heap);
    PyMem_RawFree(resident);
    PyBuffer_Release(&nx);
    PyBuffer_Release(&out);
    Py_RETURN_NONE;
}


/* ====================================================== DUE submit kernel */
/*
 * due_submit: the hot path of crawler.due.disk.DiskDUE.submit in one call (the
 * DUE's pure-Python twin is crawler/due/kernel.py; tests check both give the
 * same cache state, buffer and journal bytes).  Per call (a page's links):
 *
 *   1. probe the front cache with every fingerprint (hits are duplicates);
 *   2. append the misses to the buffer: fingerprints into `buf` at `n`, URL
 *      objects onto the list `buf_urls` (references, no copies);
 *   3. write the misses' journal record into the mapped window at `pos`:
 *        u32 tag | u32 count | u32 blob_bytes | u32 crc32 | count x u64 | blob
 *      with the URLs' UTF-8 joined by "\n" (crawler/due/journal.py).
 *
 * Returns (misses, record_bytes).  record_bytes is -1 when the record was not
 * written: it does not fit in the window, a URL holds a newline, or a URL is
 * not valid UTF-8 (lone surrogates); the caller then writes it with the
 * journal's own code, which handles those cases.
 */
#define DUE_TAG_LINES 0x4C4A5544u   /* b"DUJL", same as journal.TAG_LINES */
#define DUE_HEADER_BYTES 16
#define DUE_STACK_URLS 512          /* calls up to this size need no heap scratch */
#define DUE_PREFETCH_BYTES 1024     /* of the window past a record: about one page's record */

static uint32_t crc_table[8][256];  /* slice-by-8 tables of the zlib CRC-32 */

static void crc32_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xFF];
}

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define HAVE_CRC32_PCLMUL 1
static int have_pclmul = 0;  /* set once at module init: carry-less multiply and SSE4.1 */

/* CRC-32 by folding with carry-less multiplication (Gopal et al., "Fast CRC
 * Computation for Generic Polynomials Using PCLMULQDQ", Intel 2009; the
 * constants are the paper's bit-reflected ones for zlib's polynomial, as in
 * Chromium's zlib crc32_simd.c).  len >= 64 and a multiple of 16; `crc` is
 * the inverted running value (~zlib's), and so is the result.  ~10x the
 * table-driven loop: the journal record of every submit is checksummed. */
__attribute__((target("pclmul,sse4.1"))) static uint32_t crc32_fold(const uint8_t *buf, size_t len, uint32_t crc)
{
    const __m128i k1k2 = _mm_set_epi64x(0x01c6e41596LL, 0x0154442bd4LL);
    const __m128i k3k4 = _mm_set_epi64x(0x00ccaa009eLL, 0x01751997d0LL);
    const __m128i k5k0 = _mm_set_epi64x(0, 0x0163cd6124LL);
    const __m128i poly = _mm_set_epi64x(0x01f7011641LL, 0x01db710641LL);
    __m128i x0, x1, x2, x3, x4, x5, x6, x7, x8, y5, y6, y7, y8;
    x1 = _mm_loadu_si128((const __m128i *)(buf + 0x00));
    x2 = _mm_loadu_si128((const __m128i *)(buf + 0x10));
    x3 = _mm_loadu_si128((const __m128i *)(buf + 0x20));
    x4 = _mm_loadu_si128((const __m128i *)(buf + 0x30));
    x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)crc));
    x0 = k1k2;
    buf += 64;
    len -= 64;
    while (len >= 64) {                                  /* four 128-bit lanes in parallel */
        x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x6 = _mm_clmulepi64_si128(x2, x0, 0x00);
        x7 = _mm_clmulepi64_si128(x3, x0, 0x00);
        x8 = _mm_clmulepi64_si128(x4, x0, 0x00);
        x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
        x2 = _mm_clmulepi64_si128(x2, x0, 0x11);
        x3 = _mm_clmulepi64_si128(x3, x0, 0x11);
        x4 = _mm_clmulepi64_si128(x4, x0, 0x11);
        y5 = _mm_loadu_si128((const __m128i *)(buf + 0x00));
        y6 = _mm_loadu_si128((const __m128i *)(buf + 0x10));
        y7 = _mm_loadu_si128((const __m128i *)(buf + 0x20));
        y8 = _mm_loadu_si128((const __m128i *)(buf + 0x30));
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x5), y5);
        x2 = _mm_xor_si128(_mm_xor_si128(x2, x6), y6);
        x3 = _mm_xor_si128(_mm_xor_si128(x3, x7), y7);
        x4 = _mm_xor_si128(_mm_xor_si128(x4, x8), y8);
        buf += 64;
        len -= 64;
    }
    x0 = k3k4;                                           /* fold the lanes into one */
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x3), x5);
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x4), x5);
    while (len >= 16) {                                  /* the remaining 16-byte blocks */
        x2 = _mm_loadu_si128((const __m128i *)buf);
        x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
        buf += 16;
        len -= 16;
    }
    x2 = _mm_clmulepi64_si128(x1, x0, 0x10);             /* 128 -> 64 bits */
    x3 = _mm_setr_epi32(~0, 0, ~0, 0);
    x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), x2);
    x0 = k5k0;
    x2 = _mm_srli_si128(x1, 4);
    x1 = _mm_and_si128(x1, x3);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_xor_si128(x1, x2);
    x0 = poly;                                           /* Barrett reduction to 32 bits */
    x2 = _mm_and_si128(x1, x3);
    x2 = _mm_clmulepi64_si128(x2, x0, 0x10);
    x2 = _mm_and_si128(x2, x3);
    x2 = _mm_clmulepi64_si128(x2, x0, 0x00);
    x1 = _mm_xor_si128(x1, x2);
    return (uint32_t)_mm_extract_epi32(x1, 1);
}
#define CRC32_FOLD_MIN_BYTES 64
#define DETECT_PCLMUL() (have_pclmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1"))
#else
#define DETECT_PCLMUL() ((void)0)
#endif

/* zlib's crc32(crc, p, n): chaining calls equals one call over the concatenation. */
static uint32_t crc32_update(uint32_t crc, const uint8_t *p, size_t n)
{
#ifdef HAVE_CRC32_PCLMUL
    if (have_pclmul && n >= CRC32_FOLD_MIN_BYTES) {
        const size_t blocks = n & ~(size_t)15;
        crc = ~crc32_fold(p, blocks, ~crc);
        p += blocks;
        n -= blocks;
    }
#endif
    crc = ~crc;
    while (n && ((uintptr_t)p & 7)) {
        crc = crc_table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
        n--;
    }
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        v ^= crc;
        crc = crc_table[7][v & 0xFF] ^ crc_table[6][(v >> 8) & 0xFF] ^ crc_table[5][(v >> 16) & 0xFF] ^
              crc_table[4][(v >> 24) & 0xFF] ^ crc_table[3][(v >> 32) & 0xFF] ^
              crc_table[2][(v >> 40) & 0xFF] ^ crc_table[1][(v >> 48) & 0xFF] ^ crc_table[0][v >> 56];
        p += 8;
        n -= 8;
    }
    while (n--)
        crc = crc_table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

/* crc32(data, crc) from Python: the reference test compares it with zlib.crc32. */
static PyObject *crc32_py(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer data;
    unsigned int crc = 0;
    if (!PyArg_ParseTuple(args, "y*|I", &data, &crc))
        return NULL;
    uint32_t r = crc32_update(crc, (const uint8_t *)data.buf, (size_t)data.len);
    PyBuffer_Release(&data);
    return PyLong_FromUnsignedLong(r);
}

static inline void put_u32le(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

/* hits[i] = the cache's answer for fps[i]: the compiled policies' loops
 * directly, any other cache through its check_and_add_many. */
static int due_probe(PyObject *cache, PyObject *fps_obj, const uint64_t *fps, Py_ssize_t count, uint8_t *hits)
{
    if (PyObject_TypeCheck(cache, &ClockType) && ((ClockObject *)cache)->keys != NULL) {
        clock_loop((ClockObject *)cache, fps, hits, count);
        return 0;
    }
    if (PyObject_TypeCheck(cache, &LruType) && ((LruObject *)cache)->e != NULL) {
        lru_loop((LruObject *)cache, fps, hits, count);
        return 0;
    }
    if (PyObject_TypeCheck(cache, &RandomType) && ((RandomObject *)cache)->keys != NULL) {
        random_loop((RandomObject *)cache, fps, hits, count);
        return 0;
    }
    PyObject *r = PyObject_CallMethod(cache, "check_and_add_many", "O", fps_obj);
    if (r == NULL)
        return -1;
    Py_buffer view;
    if (PyObject_GetBuffer(r, &view, PyBUF_C_CONTIGUOUS) < 0) {
        Py_DECREF(r);
        return -1;
    }
    int ok = view.len == count && view.itemsize == 1;
    if (ok)
        for (Py_ssize_t i = 0; i < count; i++)
            hits[i] = ((const uint8_t *)view.buf)[i] != 0;
    PyBuffer_Release(&view);
    Py_DECREF(r);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "check_and_add_many must return one bool per fingerprint");
        return -1;
    }
    return 0;
}

/* The journal record of the misses at window[pos...]; returns its size, or -1
 * if it cannot be written here (see above). `ptrs`/`lens` are scratch. */
static Py_ssize_t due_record(PyObject *buf_urls, Py_ssize_t first, const uint64_t *fps, Py_ssize_t m,
                             uint8_t *window, Py_ssize_t window_len, Py_ssize_t pos,
                             const char **ptrs, Py_ssize_t *lens)
{
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
    return -1;                        /* the file is little-endian: let Python convert */
#endif
    Py_ssize_t blob = m - 1;
    for (Py_ssize_t i = 0; i < m; i++) {
        PyObject *u = PyList_GET_ITEM(buf_urls, first + i);
        if (!PyUnicode_Check(u))
            return -1;
        const char *s = PyUnicode_AsUTF8AndSize(u, &lens[i]);
        if (s == NULL) {              /* lone surrogates: the journal's own code encodes them */
            PyErr_Clear();
            return -1;
        }
        if (memchr(s, '\n', (size_t)lens[i]) != NULL)
            return -1;
        ptrs[i] = s;
        blob += lens[i];
    }
    Py_ssize_t size = DUE_HEADER_BYTES + 8 * m + blob;
    if (window == NULL || pos < 0 || m > UINT32_MAX || blob > UINT32_MAX || pos + size > window_len)
        return -1;
    uint8_t *head = window + pos, *q = head + DUE_HEADER_BYTES;
    memcpy(q, fps, (size_t)(8 * m));
    uint32_t crc = crc32_update(0, q, (size_t)(8 * m));
    uint8_t *start = q += 8 * m;
    for (Py_ssize_t i = 0; i < m; i++) {
        if (i)
            *q++ = '\n';
        memcpy(q, ptrs[i], (size_t)lens[i]);
        q += lens[i];
    }
    crc = crc32_update(crc, start, (size_t)blob);
    put_u32le(head, DUE_TAG_LINES);
    put_u32le(head + 4, (uint32_t)m);
    put_u32le(head + 8, (uint32_t)blob);
    put_u32le(head + 12, crc);
    /* The next call's record starts where this one ends: ask for those lines
     * now, so its stores find them in cache.  (The window's pages are fresh:
     * otherwise each line's first store waits for memory.) */
    const uint8_t *next = head + size, *end = window + window_len;
    for (Py_ssize_t k = 0; k < DUE_PREFETCH_BYTES && next + k < end; k += 64)
        __builtin_prefetch(next + k, 1, 2);
    return size;
}

/* Steps 1-3 for one batch: probe `count` fingerprints `src` (the array
 * object fps_obj, for caches the kernel does not know), append the misses'
 * fingerprints to dst[0..m) and their URL objects to the list buf_urls, and
 * write their record into window_obj at pos if it fits (*size = its bytes,
 * else -1).  Returns m, or -1 with an exception set (buf_urls as it was). */
static Py_ssize_t due_accept(PyObject *cache, PyObject *fps_obj, const uint64_t *src, Py_ssize_t count,
                             PyObject *urls, uint64_t *dst, PyObject *buf_urls, PyObject *window_obj,
                             Py_ssize_t pos, Py_ssize_t *size)
{
    uint8_t hits_stack[DUE_STACK_URLS];
    const char *ptrs_stack[DUE_STACK_URLS];
    Py_ssize_t lens_stack[DUE_STACK_URLS];
    uint8_t *hits = hits_stack;
    const char **ptrs = ptrs_stack;
    Py_ssize_t *lens = lens_stack;
    Py_ssize_t m = -1, first = PyList_GET_SIZE(buf_urls);
    *size = 0;
    if (count > DUE_STACK_URLS) {
        hits = PyMem_Malloc((size_t)count);
        ptrs = PyMem_Malloc((size_t)count * sizeof(*ptrs));
        lens = PyMem_Malloc((size_t)count * sizeof(*lens));
        if (hits == NULL || ptrs == NULL || lens == NULL) {
            PyErr_NoMemory();
            goto done;
        }
    }
    if (due_probe(cache, fps_obj, src, count, hits) < 0)
        goto done;
    Py_ssize_t k = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (hits[i])
            continue;
        dst[k++] = src[i];
        if (PyList_Append(buf_urls, PyList_GET_ITEM(urls, i)) < 0) {
            PyList_SetSlice(buf_urls, first, PY_SSIZE_T_MAX, NULL);
            goto done;
        }
    }
    if (k) {
        Py_buffer win;
        uint8_t *window = NULL;
        Py_ssize_t window_len = 0;
        int have_win = 0;
        if (window_obj != Py_None) {
            if (PyObject_GetBuffer(window_obj, &win, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
                PyList_SetSlice(buf_urls, first, PY_SSIZE_T_MAX, NULL);
                goto done;
            }
            have_win = 1;
            window = (uint8_t *)win.buf;
            window_len = win.len;
        }
        *size = due_record(buf_urls, first, dst, k, window, window_len, pos, ptrs, lens);
        if (have_win)
            PyBuffer_Release(&win);
    }
    m = k;
done:
    if (hits != hits_stack)
        PyMem_Free(hits);
    if (ptrs != ptrs_stack)
        PyMem_Free((void *)ptrs);
    if (lens != lens_stack)
        PyMem_Free(lens);
    return m;
}

static PyObject *due_submit(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError,
                        "due_submit(cache, fps, urls, buf, n, buf_urls, window, pos) takes 8 arguments");
        return NULL;
    }
    PyObject *cache = args[0], *fps_obj = args[1], *urls = args[2], *buf_obj = args[3];
    PyObject *buf_urls = args[5], *window_obj = args[6];
    Py_ssize_t n = PyLong_AsSsize_t(args[4]), pos = PyLong_AsSsize_t(args[7]);
    if ((n == -1 || pos == -1) && PyErr_Occurred())
        return NULL;
    if (!PyList_CheckExact(urls) || !PyList_CheckExact(buf_urls)) {
        PyErr_SetString(PyExc_TypeError, "due_submit needs lists of URLs");
        return NULL;
    }
    Py_buffer in, buf;
    PyObject *owner;
    if (get_u64_view(fps_obj, &in, &owner) < 0)
        return NULL;
    PyObject *result = NULL;
    int have_buf = 0;
    Py_ssize_t count = in.len / 8;
    if (PyList_GET_SIZE(urls) != count) {
        PyErr_SetString(PyExc_ValueError, "due_submit got a different number of fingerprints and URLs");
        goto done;
    }
    if (PyObject_GetBuffer(buf_obj, &buf, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        goto done;
    have_buf = 1;
    if (buf.itemsize != 8 || n < 0 || n + count > buf.len / 8) {
        PyErr_SetString(PyExc_ValueError, "due_submit: the buffer has no room for this batch");
        goto done;
    }
    Py_ssize_t size;
    Py_ssize_t m = due_accept(cache, fps_obj, (const uint64_t *)in.buf, count, urls, (uint64_t *)buf.buf + n,
                              buf_urls, window_obj, pos, &size);
    if (m < 0)
        goto done;
    result = Py_BuildValue("(nn)", m, size);
    if (result == NULL)
        PyList_SetSlice(buf_urls, PyList_GET_SIZE(buf_urls) - m, PY_SSIZE_T_MAX, NULL);
done:
    if (have_buf)
        PyBuffer_Release(&buf);
    PyBuffer_Release(&in);
    Py_XDECREF(owner);
    return result;
}

/* ================================================================ DueFront */
/*
 * DiskDUE.submit's common case in one call: the state the hot path touches
 * (cache, buffer, URL list, journal window and append position, counters,
 * the thresholds at which Python must look) lives here, and DiskDUE and its
 * Journal read and set it as attributes.  crawler/due/front.py has the
 * pure-Python twin (PyFront) and the protocol:
 *
 *   submit(fps, urls)      -> []          done; nothing else to do
 *                          -> slow(fps, urls)  nothing done: `attention` is set
 *                                         (URLs to hand out, releases pending),
 *                                         or the batch needs Python (not a
 *                                         list, empty, no room in the buffer)
 *                          -> finish(r)   done, but accept's answer r is not []
 *   accept(fps, urls)      -> []          done; nothing else to do
 *                          -> (n, m)      buffered at [n, n + m) but not
 *                                         journaled: Python writes the record
 *                                         and sets n = n + m
 *                          -> m           done; Python must look (fsync due,
 *                                         fault hook, merge due or finished)
 * DiskDUE binds its own submit to the front's, so a page costs one call from
 * Python, not a Python method around this one.
 */
typedef struct {
    PyObject_HEAD
    PyObject *cache;
    PyObject *buf;          /* numpy uint64 array, held exported in bufv */
    Py_buffer bufv;
    int have_bufv;
    PyObject *urls;         /* list: the buffer's URLs */
    PyObject *window;       /* the journal's mapped window, or None */
    Py_ssize_t n;           /* fingerprints in buf */
    Py_ssize_t window_at;   /* the window's file offset */
    Py_ssize_t active_bytes;/* the active segment's size */
    Py_ssize_t look_at;     /* n at which Python must look at merges */
    long long checks;       /* fingerprints offered (lifetime, set at restore) */
    double fsync_at;        /* CLOCK_MONOTONIC seconds; +inf: never */
    char dirty;             /* the segment was written since its last fsync */
    char merge_done;        /* the running merge has ended */
    char hooked;            /* a fault hook is set: always hand back to Python */
    char attention;         /* Python has URLs to hand out or releases pending */
    PyObject *slow;         /* slow(fps, urls): submit when the front does nothing */
    PyObject *finish;       /* finish(r): the rest of a submit that accept answered r */
} FrontObject;

static int front_set_buf(FrontObject *self, PyObject *value, void *Py_UNUSED(closure))
{
    if (value == NULL) {
        PyErr_SetString(PyExc_AttributeError, "buf cannot be deleted");
        return -1;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(value, &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (view.itemsize != 8 || view.ndim != 1) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "DueFront.buf must be a 1-d array of uint64");
        return -1;
    }
    if (self->have_bufv)
        PyBuffer_Release(&self->bufv);
    self->bufv = view;
    self->have_bufv = 1;
    Py_INCREF(value);
    Py_XSETREF(self->buf, value);
    return 0;
}

static PyObject *front_get_buf(FrontObject *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->buf ? self->buf : Py_None);
}

static int front_set_obj(PyObject **slot, PyObject *value, int need_list)
{
    if (value == NULL || (need_list && !PyList_CheckExact(value))) {
        PyErr_SetString(PyExc_TypeError, need_list ? "must be a list" : "cannot be deleted");
        return -1;
    }
    Py_INCREF(value);
    Py_XSETREF(*slot, value);
    return 0;
}

static PyObject *front_get_urls(FrontObject *self, void *c) { return Py_NewRef(self->urls ? self->urls : Py_None); }
static int front_set_urls(FrontObject *self, PyObject *v, void *c) { return front_set_obj(&self->urls, v, 1); }
static PyObject *front_get_cache(FrontObject *self, void *c) { return Py_NewRef(self->cache ? self->cache : Py_None); }
static int front_set_cache(FrontObject *self, PyObject *v, void *c) { return front_set_obj(&self->cache, v, 0); }
static PyObject *front_get_window(FrontObject *self, void *c) { return Py_NewRef(self->window ? self->window : Py_None); }
static int front_set_window(FrontObject *self, PyObject *v, void *c) { return front_set_obj(&self->window, v, 0); }
static PyObject *front_get_slow(FrontObject *self, void *c) { return Py_NewRef(self->slow ? self->slow : Py_None); }
static int front_set_slow(FrontObject *self, PyObject *v, void *c) { return front_set_obj(&self->slow, v, 0); }
static PyObject *front_get_finish(FrontObject *self, void *c) { return Py_NewRef(self->finish ? self->finish : Py_None); }
static int front_set_finish(FrontObject *self, PyObject *v, void *c) { return front_set_obj(&self->finish, v, 0); }

static int front_init(FrontObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"cache", "buf", NULL};
    PyObject *cache, *buf;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO:DueFront", kwlist, &cache, &buf))
        return -1;
    if (front_set_buf(self, buf, NULL) < 0)
        return -1;
    Py_INCREF(cache);
    Py_XSETREF(self->cache, cache);
    Py_XSETREF(self->urls, PyList_New(0));
    if (self->urls == NULL)
        return -1;
    Py_XSETREF(self->window, Py_NewRef(Py_None));
    Py_XSETREF(self->slow, Py_NewRef(Py_None));
    Py_XSETREF(self->finish, Py_NewRef(Py_None));
    self->n = self->window_at = self->active_bytes = 0;
    self->look_at = PY_SSIZE_T_MAX;
    self->checks = 0;
    self->fsync_at = Py_HUGE_VAL;
    self->dirty = self->merge_done = self->hooked = self->attention = 0;
    return 0;
}

/* The front takes part in garbage collection: its slow and finish are the DUE's
 * bound methods, and the DUE holds the front, so the two form a cycle. */
static int front_traverse(FrontObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->buf);
    Py_VISIT(self->cache);
    Py_VISIT(self->urls);
    Py_VISIT(self->window);
    Py_VISIT(self->slow);
    Py_VISIT(self->finish);
    return 0;
}

static int front_clear(FrontObject *self)
{
    if (self->have_bufv) {
        PyBuffer_Release(&self->bufv);
        self->have_bufv = 0;
    }
    Py_CLEAR(self->buf);
    Py_CLEAR(self->cache);
    Py_CLEAR(self->urls);
    Py_CLEAR(self->window);
    Py_CLEAR(self->slow);
    Py_CLEAR(self->finish);
    return 0;
}

static void front_dealloc(FrontObject *self)
{
    PyObject_GC_UnTrack(self);
    front_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static double monotonic_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);   /* time.monotonic's clock on Linux */
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static PyObject *front_core(FrontObject *self, PyObject *fps_obj, PyObject *urls, int quick)
{
    if (!self->have_bufv || self->cache == NULL || self->urls == NULL || self->window == NULL)
        return NOT_READY(self);
    if (!PyList_CheckExact(urls)) {
        if (quick)
            Py_RETURN_NONE;
        PyErr_SetString(PyExc_TypeError, "DueFront.accept needs a list of URLs");
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(urls);
    if (count == 0 && quick)
        Py_RETURN_NONE;
    Py_buffer in;
    PyObject *owner;
    if (get_u64_view(fps_obj, &in, &owner) < 0)
        return NULL;
    PyObject *result = NULL;
    const Py_ssize_t n = self->n;
    if (in.len / 8 != count) {
        PyErr_SetString(PyExc_ValueError, "submit got a different number of fingerprints and URLs");
        goto done;
    }
    if (n < 0 || n + count > self->bufv.len / 8) {
        if (quick)
            result = Py_NewRef(Py_None);
        else
            PyErr_SetString(PyExc_ValueError, "DueFront.accept: the buffer has no room for this batch");
        goto done;
    }
    Py_ssize_t size;
    Py_ssize_t m = due_accept(self->cache, fps_obj, (const uint64_t *)in.buf, count, urls,
                              (uint64_t *)self->bufv.buf + n, self->urls, self->window,
                              self->active_bytes - self->window_at, &size);
    if (m < 0)
        goto done;
    self->checks += count;
    if (m && size < 0) {
        result = Py_BuildValue("(nn)", n, m);
        goto done;
    }
    if (m) {
        self->n = n + m;
        self->active_bytes += size;
        self->dirty = 1;
    }
    if ((m && (self->hooked || (self->fsync_at < Py_HUGE_VAL && monotonic_s() >= self->fsync_at)))
        || self->n >= self->look_at || self->merge_done)
        result = PyLong_FromSsize_t(m);
    else
        result = PyList_New(0);
done:
    PyBuffer_Release(&in);
    Py_XDECREF(owner);
    return result;
}

static PyObject *front_submit(FrontObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "DueFront.submit(fps, urls) takes 2 arguments");
        return NULL;
    }
    PyObject *r;
    if (self->attention)
        r = Py_NewRef(Py_None);
    else if ((r = front_core(self, args[0], args[1], 1)) == NULL || PyList_CheckExact(r))
        return r;
    /* Python's turn: the front did nothing (None), or accept's answer needs it. */
    PyObject *callee = r == Py_None ? self->slow : self->finish;
    if (callee == NULL) {
        Py_DECREF(r);
        return NOT_READY(self);
    }
    Py_INCREF(callee);                      /* the call may replace the slot */
    PyObject *out = r == Py_None ? PyObject_Vectorcall(callee, args, 2, NULL)
                                 : PyObject_CallOneArg(callee, r);
    Py_DECREF(callee);
    Py_DECREF(r);
    return out;
}

static PyObject *front_accept(FrontObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "DueFront.accept(fps, urls) takes 2 arguments");
        return NULL;
    }
    return front_core(self, args[0], args[1], 0);
}

static PyMethodDef front_methods[] = {
    {"submit", (PyCFunction)(void (*)(void))front_submit, METH_FASTCALL,
     "submit(fps, urls): the hot path; hands the batch to slow() or accept's answer to finish()."},
    {"accept", (PyCFunction)(void (*)(void))front_accept, METH_FASTCALL,
     "accept(fps, urls): probe, buffer and journal a batch: [], (n, m) or m."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef front_members[] = {
    {"n", T_PYSSIZET, offsetof(FrontObject, n), 0, "fingerprints in buf"},
    {"window_at", T_PYSSIZET, offsetof(FrontObject, window_at), 0, "the window's file offset"},
    {"active_bytes", T_PYSSIZET, offsetof(FrontObject, active_bytes), 0, "the active segment's size"},
    {"look_at", T_PYSSIZET, offsetof(FrontObject, look_at), 0, "n at which Python must look at merges"},
    {"checks", T_LONGLONG, offsetof(FrontObject, checks), 0, "fingerprints offered"},
    {"fsync_at", T_DOUBLE, offsetof(FrontObject, fsync_at), 0, "when the journal fsync is due (monotonic s)"},
    {"dirty", T_BOOL, offsetof(FrontObject, dirty), 0, "written since the last fsync"},
    {"merge_done", T_BOOL, offsetof(FrontObject, merge_done), 0, "the running merge has ended"},
    {"hooked", T_BOOL, offsetof(FrontObject, hooked), 0, "a fault hook is set"},
    {"attention", T_BOOL, offsetof(FrontObject, attention), 0, "URLs to hand out or releases pending"},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef front_getset[] = {
    {"buf", (getter)front_get_buf, (setter)front_set_buf, "the buffer's fingerprints (uint64 array)", NULL},
    {"urls", (getter)front_get_urls, (setter)front_set_urls, "the buffer's URLs (list)", NULL},
    {"cache", (getter)front_get_cache, (setter)front_set_cache, "the front cache", NULL},
    {"window", (getter)front_get_window, (setter)front_set_window, "the journal's mapped window", NULL},
    {"slow", (getter)front_get_slow, (setter)front_set_slow, "slow(fps, urls): submit's Python path", NULL},
    {"finish", (getter)front_get_finish, (setter)front_set_finish, "finish(r): the rest after accept", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject FrontType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "crawler.cache._ckernel.DueFront",
    .tp_basicsize = sizeof(FrontObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "DiskDUE.submit's hot path and the state it touches (crawler/due/front.py).",
    .tp_traverse = (traverseproc)front_traverse,
    .tp_clear = (inquiry)front_clear,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)front_init,
    .tp_dealloc = (destructor)front_dealloc,
    .tp_methods = front_methods,
    .tp_members = front_members,
    .tp_getset = front_getset,
};

/* ====================================================== DUE merge kernels */
/*
 * The merge of crawler.due.disk.DiskDUE, each pass one call that does its
 * work with the GIL released (crawler/due/mergekernel.py has the numpy twins;
 * tests/unit/test_due_mergekernel.py checks both give the same arrays and the
 * same files).  Why: a background merge used to be ~20 numpy calls per bucket
 * with Python in between, and every one of those steps took the GIL from the
 * thread calling submit(); that doubled submit's wall time while a merge ran.
 * Now a merge holds the GIL for a few short Python steps, and its sort,
 * membership pass and file writing run on the other core.
 *
 *   due_sort_unique(fps, keys, first) -> u
 *       keys[:u] = the distinct fingerprints sorted, first[:u] = the earliest
 *       index of each in fps (a radix sort of (fingerprint, index) is stable,
 *       so the first of a run of equal keys is the earliest).
 *   due_find_new(keys, bounds, base_paths, base_counts, delta_paths,
 *                delta_counts, window_entries, new_mask, new_counts)
 *       keys: sorted distinct; bucket b's keys are keys[bounds[b]:bounds[b+1]].
 *       They are checked against the bucket's delta (read whole) and base
 *       (mapped window_entries fingerprints at a time, searched by galloping
 *       from the last position: the keys come sorted).  new_mask[i] = 1 for a
 *       key in neither, new_counts[b] = how many in bucket b.
 *   due_write_buckets(keys, new_mask, bounds, base_paths, base_counts,
 *                     delta_paths, delta_counts, buckets, out_paths, folds, window_entries)
 *       for each bucket buckets[i]: adds = its delta merged with its new keys;
 *       writes adds to out_paths[i] or, when folds[i], its base merged with
 *       adds (streamed through two fixed buffers).  Files are not fsynced here.
 *   due_fsync_files(paths, threads)
 *       fsync each file, `threads` at a time (the file system then commits
 *       them together).
 *   due_remove_files(paths)
 *       unlink each file (missing ones are skipped).
 *   due_pick(urls, positions) -> [urls[p] for p in positions]  (holds the GIL)
 *
 * Paths are bytes (None: the bucket has no such file).  A bucket file whose
 * size is not 8 bytes per fingerprint of its count makes the call return
 * (path, size, expected size) without going on (the caller raises
 * CorruptSetError); a failed system call raises OSError naming the file.
 * Scratch memory is mapped and unmapped here (not malloc), so it goes back to
 * the OS when the pass ends.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MSD_BITS 8                           /* the sort's first pass: by the top byte */
#define MSD_SIZE ((size_t)1 << MSD_BITS)
#define LSD_BITS 8                           /* then the other 7 bytes, one pass each */
#define LSD_PASSES 7
#define LSD_SIZE ((size_t)1 << LSD_BITS)
#define FSYNC_MAX_THREADS 64                 /* due_fsync_files runs at most this many at once */
#define SEEK_LINE_STEPS 4                    /* a lookup steps this many cache lines before it gallops */
#define DENSE_FPS_PER_KEY 8192               /* a base window is mapped whole (MAP_POPULATE) when it has a
                                                key to look up per this many fingerprints or fewer */
#define STREAM_ENTRIES ((size_t)1 << 17)     /* 1 MiB buffers for a fold's base in and its output */

typedef struct {
    int err;                 /* errno of a failed system call */
    int corrupt;             /* a file of the wrong size */
    const char *path;        /* the file either concerns */
    int64_t have, want;      /* its size and the size its count implies */
} MergeStatus;

/* Scratch memory, its pages mapped at once (one system call, not a page
 * fault per 4 KiB: faults are dear on a VM) and unmapped after use. */
static void *scratch_alloc(size_t bytes)
{
    void *p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                   -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void scratch_free(void *p, size_t bytes)
{
    if (p != NULL)
        munmap(p, bytes ? bytes : 1);
}

static int status_errno(MergeStatus *st, const char *path)
{
    st->err = errno ? errno : EIO;
    st->path = path;
    return -1;
}

/* Opens a bucket file for reading; it must hold exactly `count` fingerprints. */
static int open_bucket_file(const char *path, int64_t count, MergeStatus *st)
{
    int fd;
    do
        fd = open(path, O_RDONLY | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return status_errno(st, path);
    struct stat sb;
    if (fstat(fd, &sb) < 0) {
        status_errno(st, path);
        close(fd);
        return -1;
    }
    if ((int64_t)sb.st_size != count * 8) {
        st->corrupt = 1;
        st->path = path;
        st->have = (int64_t)sb.st_size;
        st->want = count * 8;
        close(fd);
        return -1;
    }
    return fd;
}

static int read_at(int fd, void *dst, size_t bytes, off_t offset, const char *path, MergeStatus *st)
{
    char *p = dst;
    while (bytes) {
        ssize_t r = pread(fd, p, bytes, offset);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {                         /* shrank since fstat: as corrupt as a short file */
            if (r == 0) {
                errno = EIO;
            }
            return status_errno(st, path);
        }
        p += r;
        bytes -= (size_t)r;
        offset += r;
    }
    return 0;
}

static int write_all(int fd, const void *src, size_t bytes, const char *path, MergeStatus *st)
{
    const char *p = src;
    while (bytes) {
        ssize_t w = write(fd, p, bytes);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = EIO;
            return status_errno(st, path);
        }
        p += w;
        bytes -= (size_t)w;
    }
    return 0;
}

/* A whole delta file, in scratch memory (*out NULL for an empty one). */
static int read_delta(const char *path, int64_t count, uint64_t **out, MergeStatus *st)
{
    *out = NULL;
    if (path == NULL || count <= 0)
        return 0;
    int fd = open_bucket_file(path, count, st);
    if (fd < 0)
        return -1;
    uint64_t *d = scratch_alloc((size_t)count * 8);
    int rc = d == NULL ? (errno = ENOMEM, status_errno(st, path)) : read_at(fd, d, (size_t)count * 8, 0, path, st);
    close(fd);
    if (rc < 0) {
        scratch_free(d, (size_t)count * 8);
        return -1;
    }
    *out = d;
    return 0;
}

/* First index i in [lo, n) with a[i] >= x (n if none), galloping from lo. */
static inline size_t gallop(const uint64_t *a, size_t lo, size_t n, uint64_t x)
{
    size_t hi = lo, step = 1;
    while (hi < n && a[hi] < x) {
        lo = hi + 1;
        hi += step;
        step <<= 1;
    }
    if (hi > n)
        hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The same, for a key near lo (the next key of a dense batch): a few steps of
 * a cache line (8 fingerprints) each, a predictable loop, then a branchless
 * count inside the line; further away, gallop. */
static inline size_t seek(const uint64_t *a, size_t lo, size_t n, uint64_t x)
{
    for (int step = 0; step < SEEK_LINE_STEPS && lo + 8 <= n; step++) {
        if (a[lo + 7] >= x) {
            size_t below = 0;
            for (int i = 0; i < 8; i++)
                below += a[lo + i] < x;
            return lo + below;
        }
        lo += 8;
    }
    return gallop(a, lo, n, x);
}

/* mask[i] = 0 for the sorted keys found in the sorted array `set`. */
static void unmark_found(const uint64_t *keys, size_t nk, uint8_t *mask, const uint64_t *set, size_t ns)
{
    size_t j = 0;
    for (size_t i = 0; i < nk && j < ns; i++) {
        if (!mask[i])
            continue;
        j = seek(set, j, ns, keys[i]);
        if (j < ns && set[j] == keys[i])
            mask[i] = 0;
    }
}

/* The same against a base file, mapped `window` fingerprints at a time. */
static int unmark_found_in_base(const uint64_t *keys, size_t nk, uint8_t *mask, const char *path,
                                int64_t count, int64_t window, MergeStatus *st)
{
    int fd = open_bucket_file(path, count, st);
    if (fd < 0)
        return -1;
    const int64_t page = (int64_t)sysconf(_SC_PAGESIZE);
    /* Many keys: every page will be read anyway, so map each window whole in
     * one call; few keys: let the few pages they touch fault in. */
    const int populate = (int64_t)nk * DENSE_FPS_PER_KEY >= count ? MAP_POPULATE : 0;
    size_t ki = 0;
    for (int64_t start = 0; start < count && ki < nk; start += window) {
        const int64_t w = count - start < window ? count - start : window;
        const int final = start + w >= count;
        const off_t offset = (off_t)(start * 8), aligned = offset - offset % page;
        const size_t len = (size_t)(offset - aligned) + (size_t)w * 8;
        void *m = mmap(NULL, len, PROT_READ, MAP_SHARED | populate, fd, aligned);
        if (m == MAP_FAILED) {
            status_errno(st, path);
            close(fd);
            return -1;
        }
        const uint64_t *win = (const uint64_t *)((const char *)m + (offset - aligned));
        const uint64_t last = win[w - 1];
        size_t j = 0, i = ki;
        for (; i < nk; i++) {
            if (!final && keys[i] > last)
                break;                        /* later windows hold only larger fingerprints */
            if (!mask[i])
                continue;
            j = seek(win, j, (size_t)w, keys[i]);
            if (j < (size_t)w && win[j] == keys[i])
                mask[i] = 0;
        }
        ki = i;
        munmap(m, len);
    }
    close(fd);
    return 0;
}

/* Argument helpers: a list of `count` paths (bytes or None), and int64 / byte buffers. */
static int get_paths(PyObject *list, Py_ssize_t count, const char **out, const char *what)
{
    if (!PyList_CheckExact(list) || PyList_GET_SIZE(list) != count) {
        PyErr_Format(PyExc_TypeError, "%s must be a list of %zd paths (bytes or None)", what, count);
        return -1;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *p = PyList_GET_ITEM(list, i);
        if (p == Py_None)
            out[i] = NULL;
        else if (PyBytes_CheckExact(p))
            out[i] = PyBytes_AS_STRING(p);
        else {
            PyErr_Format(PyExc_TypeError, "%s must hold bytes paths or None", what);
            return -1;
        }
    }
    return 0;
}

static int get_array(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, Py_ssize_t min_items, int writable,
                     const char *what)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    if (view->itemsize != itemsize || view->len / itemsize < min_items) {
        PyErr_Format(PyExc_ValueError, "%s must be a contiguous array of at least %zd items of %zd bytes",
                     what, min_items, itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* After a pass: None, the corrupt file's (path, size, expected), or OSError set. */
static PyObject *merge_result(const MergeStatus *st)
{
    if (st->corrupt)
        return Py_BuildValue("(yLL)", st->path, (long long)st->have, (long long)st->want);
    if (st->err) {
        errno = st->err;
        return PyErr_SetFromErrnoWithFilename(PyExc_OSError, st->path);
    }
    Py_RETURN_NONE;
}

/* --- due_sort_unique ------------------------------------------------------- */

typedef struct {
    uint64_t key;
    int64_t pos;
} KeyPos;

/* Stable sort of (key, position) pairs: one pass distributes them by the top
 * byte (MSD_BITS), then each of those runs (~n/256 pairs, in cache) is sorted
 * by an LSD radix sort of the remaining bytes.  Both steps are stable. */
static void radix_sort_pairs(const uint64_t *fps, size_t n, KeyPos *a, KeyPos *b)
{
    size_t start[MSD_SIZE + 1] = {0}, at[MSD_SIZE];
    for (size_t i = 0; i < n; i++)
        start[(fps[i] >> (64 - MSD_BITS)) + 1]++;
    for (size_t x = 0; x < MSD_SIZE; x++) {
        start[x + 1] += start[x];
        at[x] = start[x];
    }
    for (size_t i = 0; i < n; i++) {
        const uint64_t k = fps[i];
        KeyPos *dst = &a[at[k >> (64 - MSD_BITS)]++];
        dst->key = k;
        dst->pos = (int64_t)i;
    }
    size_t hist[LSD_PASSES][LSD_SIZE];
    for (size_t x = 0; x < MSD_SIZE; x++) {
        const size_t lo = start[x], m = start[x + 1] - lo;
        if (m < 2)
            continue;
        KeyPos *src = a + lo, *dst = b + lo;
        memset(hist, 0, sizeof(hist));
        for (size_t i = 0; i < m; i++) {
            const uint64_t k = src[i].key;
            for (int d = 0; d < LSD_PASSES; d++)
                hist[d][(k >> (d * LSD_BITS)) & (LSD_SIZE - 1)]++;
        }
        for (int d = 0; d < LSD_PASSES; d++) {
            size_t *h = hist[d];
            if (h[(src[0].key >> (d * LSD_BITS)) & (LSD_SIZE - 1)] == m)
                continue;                      /* one digit value: this pass keeps the order */
            size_t sum = 0;
            for (size_t v = 0; v < LSD_SIZE; v++) {
                const size_t c = h[v];
                h[v] = sum;
                sum += c;
            }
            for (size_t i = 0; i < m; i++) {
                const KeyPos kp = src[i];
                dst[h[(kp.key >> (d * LSD_BITS)) & (LSD_SIZE - 1)]++] = kp;
            }
            KeyPos *t = src;
            src = dst;
            dst = t;
        }
        if (src != a + lo)
            memcpy(a + lo, src, m * sizeof(KeyPos));
    }
}

static int radix_sort_unique(const uint64_t *fps, size_t n, uint64_t *keys, int64_t *first, size_t *unique)
{
    *unique = 0;
    if (n == 0)
        return 0;
    const size_t scratch_bytes = 2 * n * sizeof(KeyPos);
    KeyPos *a = scratch_alloc(scratch_bytes);
    if (a == NULL)
        return -1;
    radix_sort_pairs(fps, n, a, a + n);
    size_t u = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || a[i].key != keys[u - 1]) {   /* the first of a run is the earliest (stable) */
            keys[u] = a[i].key;
            first[u] = a[i].pos;
            u++;
        }
    }
    scratch_free(a, scratch_bytes);
    *unique = u;
    return 0;
}

static PyObject *due_sort_unique(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *fps_obj, *keys_obj, *first_obj;
    if (!PyArg_ParseTuple(args, "OOO:due_sort_unique", &fps_obj, &keys_obj, &first_obj))
        return NULL;
    Py_buffer in, keys, first;
    PyObject *owner;
    if (get_u64_view(fps_obj, &in, &owner) < 0)
        return NULL;
    const Py_ssize_t n = in.len / 8;
    PyObject *result = NULL;
    if (get_array(keys_obj, &keys, 8, n, 1, "keys") < 0)
        goto release_in;
    if (get_array(first_obj, &first, 8, n, 1, "first") < 0)
        goto release_keys;
    size_t u;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = radix_sort_unique((const uint64_t *)in.buf, (size_t)n, (uint64_t *)keys.buf, (int64_t *)first.buf, &u);
    Py_END_ALLOW_THREADS
    result = rc < 0 ? PyErr_NoMemory() : PyLong_FromSize_t(u);
    PyBuffer_Release(&first);
release_keys:
    PyBuffer_Release(&keys);
release_in:
    PyBuffer_Release(&in);
    Py_XDECREF(owner);
    return result;
}

/* --- due_find_new ------------------------------------------------------------ */

typedef struct {
    const uint64_t *keys;
    const int64_t *bounds;
    Py_ssize_t buckets;
    const char **base_paths, **delta_paths;
    const int64_t *base_counts, *delta_counts;
    int64_t window;
    uint8_t *new_mask;
    int64_t *new_counts;
} FindJob;

static int find_new_pass(const FindJob *j, MergeStatus *st)
{
    for (Py_ssize_t b = 0; b < j->buckets; b++) {
        const int64_t lo = j->bounds[b], hi = j->bounds[b + 1];
        j->new_counts[b] = 0;
        if (hi <= lo)
            continue;
        const size_t nk = (size_t)(hi - lo);
        const uint64_t *kb = j->keys + lo;
        uint8_t *mask = j->new_mask + lo;
        memset(mask, 1, nk);
        uint64_t *delta;
        if (read_delta(j->delta_paths[b], j->delta_counts[b], &delta, st) < 0)
            return -1;
        if (delta != NULL) {
            unmark_found(kb, nk, mask, delta, (size_t)j->delta_counts[b]);
            scratch_free(delta, (size_t)j->delta_counts[b] * 8);
        }
        if (j->base_paths[b] != NULL && j->base_counts[b] > 0 &&
            unmark_found_in_base(kb, nk, mask, j->base_paths[b], j->base_counts[b], j->window, st) < 0)
            return -1;
        int64_t fresh = 0;
        for (size_t i = 0; i < nk; i++)
            fresh += mask[i];
        j->new_counts[b] = fresh;
    }
    return 0;
}

/* Checks bounds: buckets + 1 nondecreasing offsets from 0 to len(keys). */
static int check_bounds(const int64_t *bounds, Py_ssize_t buckets, Py_ssize_t nkeys)
{
    if (bounds[0] != 0 || bounds[buckets] != nkeys)
        goto bad;
    for (Py_ssize_t b = 0; b < buckets; b++)
        if (bounds[b + 1] < bounds[b])
            goto bad;
    return 0;
bad:
    PyErr_SetString(PyExc_ValueError, "bounds must rise from 0 to the number of keys");
    return -1;
}

static PyObject *due_find_new(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *keys_o, *bounds_o, *bp_o, *bc_o, *dp_o, *dc_o, *mask_o, *nc_o;
    long long window;
    if (!PyArg_ParseTuple(args, "OOOOOOLOO:due_find_new", &keys_o, &bounds_o, &bp_o, &bc_o, &dp_o, &dc_o,
                          &window, &mask_o, &nc_o))
        return NULL;
    if (window < 1) {
        PyErr_SetString(PyExc_ValueError, "window_entries must be at least 1");
        return NULL;
    }
    Py_buffer keys, bounds, bc, dc, mask, nc;
    PyObject *result = NULL;
    const char **paths = NULL;
    if (get_array(keys_o, &keys, 8, 0, 0, "keys") < 0)
        return NULL;
    const Py_ssize_t nkeys = keys.len / 8;
    if (get_array(bounds_o, &bounds, 8, 2, 0, "bounds") < 0)
        goto r0;
    const Py_ssize_t buckets = bounds.len / 8 - 1;
    if (get_array(bc_o, &bc, 8, buckets, 0, "base_counts") < 0)
        goto r1;
    if (get_array(dc_o, &dc, 8, buckets, 0, "delta_counts") < 0)
        goto r2;
    if (get_array(mask_o, &mask, 1, nkeys, 1, "new_mask") < 0)
        goto r3;
    if (get_array(nc_o, &nc, 8, buckets, 1, "new_counts") < 0)
        goto r4;
    paths = PyMem_Malloc(sizeof(*paths) * 2 * (size_t)buckets);
    if (paths == NULL) {
        PyErr_NoMemory();
        goto r5;
    }
    if (check_bounds((const int64_t *)bounds.buf, buckets, nkeys) < 0 ||
        get_paths(bp_o, buckets, paths, "base_paths") < 0 ||
        get_paths(dp_o, buckets, paths + buckets, "delta_paths") < 0)
        goto r6;
    FindJob job = {(const uint64_t *)keys.buf, (const int64_t *)bounds.buf, buckets, paths, paths + buckets,
                   (const int64_t *)bc.buf, (const int64_t *)dc.buf, (int64_t)window, (uint8_t *)mask.buf,
                   (int64_t *)nc.buf};
    MergeStatus st = {0, 0, NULL, -1, -1};
    Py_BEGIN_ALLOW_THREADS
    find_new_pass(&job, &st);
    Py_END_ALLOW_THREADS
    result = merge_result(&st);
r6:
    PyMem_Free(paths);
r5:
    PyBuffer_Release(&nc);
r4:
    PyBuffer_Release(&mask);
r3:
    PyBuffer_Release(&dc);
r2:
    PyBuffer_Release(&bc);
r1:
    PyBuffer_Release(&bounds);
r0:
    PyBuffer_Release(&keys);
    return result;
}

/* --- due_write_buckets --------------------------------------------------------- */

typedef struct {
    int fd;
    uint64_t *buf;
    size_t n;
    const char *path;
} OutFile;

static inline int out_put(OutFile *o, uint64_t v, MergeStatus *st)
{
    o->buf[o->n++] = v;
    if (o->n < STREAM_ENTRIES)
        return 0;
    o->n = 0;
    return write_all(o->fd, o->buf, STREAM_ENTRIES * 8, o->path, st);
}

/* The new base: base (streamed in chunks) merged with the sorted `adds`. */
static int write_fold(OutFile *o, const char *base_path, int64_t base_count, const uint64_t *adds, size_t na,
                      uint64_t *chunk, size_t chunk_entries, MergeStatus *st)
{
    size_t ai = 0;
    if (base_path != NULL && base_count > 0) {
        int fd = open_bucket_file(base_path, base_count, st);
        if (fd < 0)
            return -1;
        for (int64_t start = 0; start < base_count; start += (int64_t)chunk_entries) {
            const size_t c = (size_t)(base_count - start) < chunk_entries ? (size_t)(base_count - start) : chunk_entries;
            if (read_at(fd, chunk, c * 8, (off_t)(start * 8), base_path, st) < 0) {
                close(fd);
                return -1;
            }
            for (size_t i = 0; i < c; i++) {
                const uint64_t v = chunk[i];
                while (ai < na && adds[ai] < v)
                    if (out_put(o, adds[ai++], st) < 0) {
                        close(fd);
                        return -1;
                    }
                if (out_put(o, v, st) < 0) {
                    close(fd);
                    return -1;
                }
            }
        }
        close(fd);
    }
    for (; ai < na; ai++)
        if (out_put(o, adds[ai], st) < 0)
            return -1;
    return write_all(o->fd, o->buf, o->n * 8, o->path, st);
}

typedef struct {
    const uint64_t *keys;
    const uint8_t *new_mask;
    const int64_t *bounds;
    const char **base_paths, **delta_paths;               /* per bucket of the set */
    const int64_t *base_counts, *delta_counts;
    const int64_t *buckets;                               /* the buckets to write */
    Py_ssize_t count;
    const char **out_paths;                               /* per bucket to write */
    const uint8_t *folds;
    int64_t window;
} WriteJob;

static int write_one(const WriteJob *j, Py_ssize_t i, uint64_t *out_buf, uint64_t *chunk, size_t chunk_entries,
                     MergeStatus *st)
{
    const int64_t b = j->buckets[i];
    const int64_t lo = j->bounds[b], hi = j->bounds[b + 1];
    size_t nn = 0;
    for (int64_t k = lo; k < hi; k++)
        nn += j->new_mask[k] != 0;
    uint64_t *delta;
    if (read_delta(j->delta_paths[b], j->delta_counts[b], &delta, st) < 0)
        return -1;
    const size_t nd = delta != NULL ? (size_t)j->delta_counts[b] : 0, na = nd + nn;
    uint64_t *adds = scratch_alloc(na * 8);
    if (adds == NULL) {
        scratch_free(delta, nd * 8);
        errno = ENOMEM;
        return status_errno(st, j->out_paths[i]);
    }
    size_t di = 0, n = 0;                         /* adds = delta merged with the new keys */
    for (int64_t k = lo; k < hi; k++) {
        if (!j->new_mask[k])
            continue;
        const uint64_t v = j->keys[k];
        while (di < nd && delta[di] < v)
            adds[n++] = delta[di++];
        adds[n++] = v;
    }
    while (di < nd)
        adds[n++] = delta[di++];
    scratch_free(delta, nd * 8);
    int fd;
    do
        fd = open(j->out_paths[i], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    while (fd < 0 && errno == EINTR);
    int rc;
    if (fd < 0)
        rc = status_errno(st, j->out_paths[i]);
    else {
        if (j->folds[i]) {
            OutFile o = {fd, out_buf, 0, j->out_paths[i]};
            rc = write_fold(&o, j->base_paths[b], j->base_counts[b], adds, na, chunk, chunk_entries, st);
        } else
            rc = write_all(fd, adds, na * 8, j->out_paths[i], st);
        if (close(fd) < 0 && rc == 0)
            rc = status_errno(st, j->out_paths[i]);
    }
    scratch_free(adds, na * 8);
    return rc;
}

static int write_pass(const WriteJob *j, MergeStatus *st)
{
    const size_t chunk_entries = (size_t)j->window < STREAM_ENTRIES ? (size_t)j->window : STREAM_ENTRIES;
    const size_t bytes = (STREAM_ENTRIES + chunk_entries) * 8;
    uint64_t *out_buf = scratch_alloc(bytes);
    if (out_buf == NULL) {
        st->err = ENOMEM;
        return -1;
    }
    int rc = 0;
    for (Py_ssize_t i = 0; i < j->count && rc == 0; i++)
        rc = write_one(j, i, out_buf, out_buf + STREAM_ENTRIES, chunk_entries, st);
    scratch_free(out_buf, bytes);
    return rc;
}

static PyObject *due_write_buckets(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *keys_o, *mask_o, *bounds_o, *bp_o, *bc_o, *dp_o, *dc_o, *buckets_o, *op_o, *folds_o;
    long long window;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOL:due_write_buckets", &keys_o, &mask_o, &bounds_o, &bp_o, &bc_o,
                          &dp_o, &dc_o, &buckets_o, &op_o, &folds_o, &window))
        return NULL;
    if (window < 1) {
        PyErr_SetString(PyExc_ValueError, "window_entries must be at least 1");
        return NULL;
    }
    Py_buffer keys, mask, bounds, bk, bc, dc, folds;
    PyObject *result = NULL;
    const char **paths = NULL;
    if (get_array(keys_o, &keys, 8, 0, 0, "keys") < 0)
        return NULL;
    const Py_ssize_t nkeys = keys.len / 8;
    if (get_array(mask_o, &mask, 1, nkeys, 0, "new_mask") < 0)
        goto r0;
    if (get_array(bounds_o, &bounds, 8, 2, 0, "bounds") < 0)
        goto r1;
    const Py_ssize_t nbuckets = bounds.len / 8 - 1;
    if (get_array(bc_o, &bc, 8, nbuckets, 0, "base_counts") < 0)
        goto r2;
    if (get_array(dc_o, &dc, 8, nbuckets, 0, "delta_counts") < 0)
        goto r3;
    if (get_array(buckets_o, &bk, 8, 0, 0, "buckets") < 0)
        goto r4;
    const Py_ssize_t count = bk.len / 8;
    if (get_array(folds_o, &folds, 1, count, 0, "folds") < 0)
        goto r5;
    paths = PyMem_Malloc(sizeof(*paths) * (size_t)(2 * nbuckets + count));
    if (paths == NULL) {
        PyErr_NoMemory();
        goto r6;
    }
    if (check_bounds((const int64_t *)bounds.buf, nbuckets, nkeys) < 0 ||
        get_paths(bp_o, nbuckets, paths, "base_paths") < 0 ||
        get_paths(dp_o, nbuckets, paths + nbuckets, "delta_paths") < 0 ||
        get_paths(op_o, count, paths + 2 * nbuckets, "out_paths") < 0)
        goto r7;
    for (Py_ssize_t i = 0; i < count; i++) {
        const int64_t b = ((const int64_t *)bk.buf)[i];
        if (b < 0 || b >= nbuckets || paths[2 * nbuckets + i] == NULL) {
            PyErr_SetString(PyExc_ValueError, "buckets must be bucket numbers, each with an out path");
            goto r7;
        }
    }
    WriteJob job = {(const uint64_t *)keys.buf, (const uint8_t *)mask.buf, (const int64_t *)bounds.buf,
                    paths, paths + nbuckets, (const int64_t *)bc.buf, (const int64_t *)dc.buf,
                    (const int64_t *)bk.buf, count, paths + 2 * nbuckets, (const uint8_t *)folds.buf,
                    (int64_t)window};
    MergeStatus st = {0, 0, NULL, -1, -1};
    Py_BEGIN_ALLOW_THREADS
    write_pass(&job, &st);
    Py_END_ALLOW_THREADS
    result = merge_result(&st);
r7:
    PyMem_Free(paths);
r6:
    PyBuffer_Release(&folds);
r5:
    PyBuffer_Release(&bk);
r4:
    PyBuffer_Release(&dc);
r3:
    PyBuffer_Release(&bc);
r2:
    PyBuffer_Release(&bounds);
r1:
    PyBuffer_Release(&mask);
r0:
    PyBuffer_Release(&keys);
    return result;
}

/* --- due_fsync_files ------------------------------------------------------------ */

/* fsync a merge's new files from parallel threads, so the file system commits
 * them together (one journal commit instead of one each), with no Python
 * thread pool taking the GIL per file. */
#define FSYNC_STACK_BYTES ((size_t)1 << 16)

typedef struct {
    const char **paths;
    Py_ssize_t count;
    Py_ssize_t next;                 /* the next path to take (atomic) */
    pthread_mutex_t lock;
    int err;                         /* the first failure */
    Py_ssize_t failed;
} FsyncJob;

static void *fsync_worker(void *arg)
{
    FsyncJob *j = arg;
    for (;;) {
        const Py_ssize_t i = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
        if (i >= j->count)
            return NULL;
        int fd, e = 0;
        do
            fd = open(j->paths[i], O_RDONLY | O_CLOEXEC);
        while (fd < 0 && errno == EINTR);
        if (fd < 0)
            e = errno;
        else {
            if (fsync(fd) < 0)
                e = errno;
            close(fd);
        }
        if (e) {
            pthread_mutex_lock(&j->lock);
            if (!j->err || i < j->failed) {
                j->err = e;
                j->failed = i;
            }
            pthread_mutex_unlock(&j->lock);
        }
    }
}

static void fsync_all(FsyncJob *j, Py_ssize_t threads)
{
    pthread_t tids[FSYNC_MAX_THREADS];
    Py_ssize_t started = 0;
    pthread_attr_t attr;
    const int have_attr = pthread_attr_init(&attr) == 0;
    if (have_attr)
        pthread_attr_setstacksize(&attr, FSYNC_STACK_BYTES);
    for (Py_ssize_t t = 1; t < threads; t++) {      /* the calling thread is the first worker */
        if (pthread_create(&tids[started], have_attr ? &attr : NULL, fsync_worker, j) != 0)
            break;                                   /* fewer threads: the others take more files */
        started++;
    }
    fsync_worker(j);
    for (Py_ssize_t t = 0; t < started; t++)
        pthread_join(tids[t], NULL);
    if (have_attr)
        pthread_attr_destroy(&attr);
}

static PyObject *due_fsync_files(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *list;
    Py_ssize_t threads;
    if (!PyArg_ParseTuple(args, "O!n:due_fsync_files", &PyList_Type, &list, &threads))
        return NULL;
    const Py_ssize_t count = PyList_GET_SIZE(list);
    if (count == 0)
        Py_RETURN_NONE;
    const char **paths = PyMem_Malloc(sizeof(*paths) * (size_t)count);
    if (paths == NULL)
        return PyErr_NoMemory();
    if (get_paths(list, count, paths, "paths") < 0) {
        PyMem_Free(paths);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < count; i++)
        if (paths[i] == NULL) {
            PyMem_Free(paths);
            PyErr_SetString(PyExc_TypeError, "paths must be bytes");
            return NULL;
        }
    if (threads > count)
        threads = count;
    if (threads > FSYNC_MAX_THREADS)
        threads = FSYNC_MAX_THREADS;
    if (threads < 1)
        threads = 1;
    FsyncJob job = {paths, count, 0, PTHREAD_MUTEX_INITIALIZER, 0, 0};
    Py_BEGIN_ALLOW_THREADS
    fsync_all(&job, threads);
    Py_END_ALLOW_THREADS
    PyObject *result = NULL;
    if (job.err) {
        errno = job.err;
        PyErr_SetFromErrnoWithFilename(PyExc_OSError, paths[job.failed]);
    } else
        result = Py_NewRef(Py_None);
    PyMem_Free(paths);
    return result;
}

/* --- due_remove_files ---------------------------------------------------------- */

/* Delete files (those already gone are skipped) in one call: a merge replaces
 * a few dozen bucket files, and an os.unlink each would take the GIL back
 * from the caller as many times. */
static PyObject *due_remove_files(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *list;
    if (!PyArg_ParseTuple(args, "O!:due_remove_files", &PyList_Type, &list))
        return NULL;
    const Py_ssize_t count = PyList_GET_SIZE(list);
    const char **paths = PyMem_Malloc(sizeof(*paths) * (size_t)(count ? count : 1));
    if (paths == NULL)
        return PyErr_NoMemory();
    if (get_paths(list, count, paths, "paths") < 0) {
        PyMem_Free(paths);
        return NULL;
    }
    int err = 0;
    Py_ssize_t failed = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < count && !err; i++)
        if (paths[i] != NULL && unlink(paths[i]) < 0 && errno != ENOENT) {
            err = errno;
            failed = i;
        }
    Py_END_ALLOW_THREADS
    PyObject *result = NULL;
    if (err) {
        errno = err;
        PyErr_SetFromErrnoWithFilename(PyExc_OSError, paths[failed]);
    } else
        result = Py_NewRef(Py_None);
    PyMem_Free(paths);
    return result;
}

/* --- due_pick ------------------------------------------------------------------- */

static PyObject *due_pick(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *urls, *pos_o;
    if (!PyArg_ParseTuple(args, "O!O:due_pick", &PyList_Type, &urls, &pos_o))
        return NULL;
    Py_buffer pos;
    if (get_array(pos_o, &pos, 8, 0, 0, "positions") < 0)
        return NULL;
    const Py_ssize_t m = pos.len / 8, n = PyList_GET_SIZE(urls);
    const int64_t *p = (const int64_t *)pos.buf;
    PyObject *out = PyList_New(m);
    for (Py_ssize_t i = 0; out != NULL && i < m; i++) {
        if (p[i] < 0 || p[i] >= n) {
            Py_CLEAR(out);
            PyErr_SetString(PyExc_IndexError, "due_pick: position out of range");
            break;
        }
        PyObject *u = PyList_GET_ITEM(urls, p[i]);
        Py_INCREF(u);
        PyList_SET_ITEM(out, i, u);
    }
    PyBuffer_Release(&pos);
    return out;
}

/* --- due_populate_write ---------------------------------------------------------- */
/* A journal window is a shared file mapping; its pages start write-protected
 * (the kernel tracks which are dirty), so the first write to each faults, on
 * submit's hot path.  MADV_POPULATE_WRITE (Linux 5.14) takes those faults now,
 * in the journal's mapper thread, with the GIL released (Python's own
 * mmap.madvise keeps it, and would stall submit for the ~2 ms it takes per
 * 4 MiB window).  No byte changes.  Returns False where the kernel or the file
 * system cannot (the pages then fault as they are written). */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
static PyObject *due_populate_write(PyObject *Py_UNUSED(module), PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t start = (uintptr_t)view.buf & ~(uintptr_t)(page - 1);
    size_t length = (size_t)((uintptr_t)view.buf + (uintptr_t)view.len - start);
    int rc = 0;
    if (view.len > 0) {
        Py_BEGIN_ALLOW_THREADS
        rc = madvise((void *)start, length, MADV_POPULATE_WRITE);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&view);
    return PyBool_FromLong(rc == 0 && view.len > 0);
}

/* --- split_owners ----------------------------------------------------------------- */

/* The host splitter's per-page pass (crawler/splitter/routekernel.py has the twin and
 * the why): the owner of each URL from a memo keyed by its `scheme://authority`
 * prefix, `resolve(origin, url)` on a miss; counts per destination; the indexes of
 * the cross URLs; and, when there are any, the indexes and URLs of the local ones. */
static PyObject *split_owners(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "split_owners(urls, memo, resolve, me, start, counts) takes 6 arguments");
        return NULL;
    }
    PyObject *urls = args[0], *memo = args[1], *resolve = args[2], *counts = args[5];
    if (!PyList_Check(urls) || !PyDict_Check(memo) || !PyList_Check(counts)) {
        PyErr_SetString(PyExc_TypeError, "split_owners: urls and counts must be lists, memo a dict");
        return NULL;
    }
    const Py_ssize_t me = PyLong_AsSsize_t(args[3]), start = PyLong_AsSsize_t(args[4]);
    if ((me == -1 || start == -1) && PyErr_Occurred())
        return NULL;
    const Py_ssize_t nodes = PyList_GET_SIZE(counts);
    if (me < 0 || me >= nodes || start < 0) {
        PyErr_SetString(PyExc_ValueError, "split_owners: me must index counts, start must be >= 0");
        return NULL;
    }
    /* resolve() is Python and could change `urls`: hold our own reference to the list's items. */
    PyObject *items = PyList_GetSlice(urls, 0, PyList_GET_SIZE(urls));
    Py_ssize_t *tally = PyMem_Calloc((size_t)nodes, sizeof(Py_ssize_t));
    const Py_ssize_t n = items ? PyList_GET_SIZE(items) : 0;
    PyObject *owners = PyList_New(n), *cross = PyList_New(0), *keep = NULL, *keep_urls = NULL, *result = NULL;
    if (items == NULL || tally == NULL || owners == NULL || cross == NULL) {
        if (tally == NULL)
            PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *url = PyList_GET_ITEM(items, i);
        if (!PyUnicode_Check(url)) {
            PyErr_SetString(PyExc_TypeError, "split_owners: URLs must be str");
            goto done;
        }
        const Py_ssize_t len = PyUnicode_GET_LENGTH(url);
        const Py_ssize_t cut = start < len ? PyUnicode_FindChar(url, '/', start, len, 1) : -1;
        if (cut == -2)
            goto done;
        PyObject *origin = cut >= 0 ? PyUnicode_Substring(url, 0, cut) : Py_NewRef(url);
        if (origin == NULL)
            goto done;
        Py_ssize_t owner;
        PyObject *known = PyDict_GetItemWithError(memo, origin);    /* borrowed */
        if (known != NULL)
            owner = PyLong_AsSsize_t(known);
        else if (PyErr_Occurred())
            owner = -1;
        else {
            PyObject *r = PyObject_CallFunctionObjArgs(resolve, origin, url, NULL);
            owner = r ? PyLong_AsSsize_t(r) : -1;
            Py_XDECREF(r);
        }
        Py_DECREF(origin);
        if (owner == -1 && PyErr_Occurred())
            goto done;
        if (owner < 0 || owner >= nodes) {
            PyErr_Format(PyExc_ValueError, "split_owners: owner %zd of a URL is not a node (0..%zd)", owner, nodes - 1);
            goto done;
        }
        PyObject *owner_o = PyLong_FromSsize_t(owner);
        if (owner_o == NULL)
            goto done;
        PyList_SET_ITEM(owners, i, owner_o);
        tally[owner]++;
        if (owner != me) {
            PyObject *index = PyLong_FromSsize_t(i);
            if (index == NULL || PyList_Append(cross, index) < 0) {
                Py_XDECREF(index);
                goto done;
            }
            Py_DECREF(index);
        }
    }
    for (Py_ssize_t d = 0; d < nodes; d++) {
        if (!tally[d])
            continue;
        PyObject *add = PyLong_FromSsize_t(tally[d]);
        PyObject *sum = add ? PyNumber_Add(PyList_GET_ITEM(counts, d), add) : NULL;
        Py_XDECREF(add);
        if (sum == NULL || PyList_SetItem(counts, d, sum) < 0)
            goto done;
    }
    const Py_ssize_t n_cross = PyList_GET_SIZE(cross);
    if (n_cross) {
        keep = PyList_New(n - n_cross);
        keep_urls = PyList_New(n - n_cross);
        if (keep == NULL || keep_urls == NULL)
            goto done;
        for (Py_ssize_t i = 0, k = 0; i < n; i++) {
            if (PyLong_AsSsize_t(PyList_GET_ITEM(owners, i)) != me)
                continue;
            PyObject *index = PyLong_FromSsize_t(i);
            if (index == NULL)
                goto done;
            PyList_SET_ITEM(keep, k, index);
            PyList_SET_ITEM(keep_urls, k, Py_NewRef(PyList_GET_ITEM(items, i)));
            k++;
        }
    } else {
        keep = Py_NewRef(Py_None);
        keep_urls = Py_NewRef(Py_None);
    }
    result = PyTuple_Pack(4, owners, cross, keep, keep_urls);
done:
    PyMem_Free(tally);
    Py_XDECREF(items);
    Py_XDECREF(owners);
    Py_XDECREF(cross);
    Py_XDECREF(keep);
    Py_XDECREF(keep_urls);
    return result;
}

/* ================================================================= module */
static PyMethodDef module_methods[] = {
    {"belady", belady, METH_VARARGS,
     "belady(next_use, capacity, out): MIN's hit (1) / miss (0) per request into out."},
    {"due_submit", (PyCFunction)(void (*)(void))due_submit, METH_FASTCALL,
     "due_submit(cache, fps, urls, buf, n, buf_urls, window, pos) -> (misses, record_bytes): "
     "the DUE's submit hot path (see crawler/due/kernel.py)."},
    {"crc32", crc32_py, METH_VARARGS, "crc32(data, crc=0): zlib's CRC-32, as the DUE kernel computes it."},
    {"due_sort_unique", due_sort_unique, METH_VARARGS,
     "due_sort_unique(fps, keys, first) -> count: sorted distinct fingerprints and each one's earliest index "
     "(GIL released; see crawler/due/mergekernel.py)."},
    {"due_find_new", due_find_new, METH_VARARGS,
     "due_find_new(keys, bounds, base_paths, base_counts, delta_paths, delta_counts, window_entries, new_mask, "
     "new_counts) -> None | (path, size, expected): which sorted keys are in no bucket file (GIL released)."},
    {"due_write_buckets", due_write_buckets, METH_VARARGS,
     "due_write_buckets(keys, new_mask, bounds, base_paths, base_counts, delta_paths, delta_counts, buckets, "
     "out_paths, folds, window_entries) -> None | (path, size, expected): new delta or base files (GIL released)."},
    {"due_fsync_files", due_fsync_files, METH_VARARGS,
     "due_fsync_files(paths, threads): fsync the files from parallel threads (GIL released)."},
    {"due_remove_files", due_remove_files, METH_VARARGS,
     "due_remove_files(paths): unlink the files, skipping missing ones (GIL released)."},
    {"due_pick", due_pick, METH_VARARGS, "due_pick(urls, positions) -> [urls[p] for p in positions]."},
    {"due_populate_write", due_populate_write, METH_O,
     "due_populate_write(mapping) -> bool: fault a shared mapping's pages in writable now (GIL released)."},
    {"split_owners", (PyCFunction)(void (*)(void))split_owners, METH_FASTCALL,
     "split_owners(urls, memo, resolve, me, start, counts) -> (owners, cross, keep, keep_urls): "
     "the host splitter's per-page pass (see crawler/splitter/routekernel.py)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef ckernel_module = {
    PyModuleDef_HEAD_INIT, "crawler.cache._ckernel",
    "Compiled kernels of crawler.cache (see _ckernel.c).", -1, module_methods,
    NULL, NULL, NULL, NULL};

static int add_type(PyObject *m, PyTypeObject *t, const char *name)
{
    if (PyType_Ready(t) < 0)
        return -1;
    Py_INCREF(t);
    if (PyModule_AddObject(m, name, (PyObject *)t) < 0) {
        Py_DECREF(t);
        return -1;
    }
    return 0;
}

PyMODINIT_FUNC PyInit__ckernel(void)
{
    DETECT_CPU();
    DETECT_PCLMUL();
    crc32_init();
    PyObject *numpy = PyImport_ImportModule("numpy");
    if (numpy == NULL)
        return NULL;
    np_empty = PyObject_GetAttrString(numpy, "empty");
    np_ascontiguousarray = PyObject_GetAttrString(numpy, "ascontiguousarray");
    np_uint64 = PyObject_GetAttrString(numpy, "uint64");
    np_bool = PyObject_GetAttrString(numpy, "bool_");
    np_ndarray = PyObject_GetAttrString(numpy, "ndarray");
    PyObject *dtype = PyObject_GetAttrString(numpy, "dtype");
    np_u64_dtype = dtype && np_uint64 ? PyObject_CallOneArg(dtype, np_uint64) : NULL;
    Py_XDECREF(dtype);
    Py_DECREF(numpy);
    str_dtype = PyUnicode_InternFromString("dtype");
    if (!np_empty || !np_ascontiguousarray || !np_uint64 || !np_bool || !np_ndarray || !np_u64_dtype || !str_dtype)
        return NULL;
    PyObject *m = PyModule_Create(&ckernel_module);
    if (m == NULL)
        return NULL;
    if (add_type(m, &ClockType, "ClockKernel") < 0 || add_type(m, &LruType, "LruKernel") < 0 ||
        add_type(m, &RandomType, "RandomKernel") < 0 || add_type(m, &SetType, "SetKernel") < 0 ||
        add_type(m, &FrontType, "DueFront") < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
