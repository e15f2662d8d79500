/*
 * ClockSetsKernel(capacity, ways): set-associative CLOCK, the kernel of the
 * `clock-sets` cache policy (crawler/cache/clock_sets.py has its pure-Python
 * twin).  Also clock_sets_probe, its batch loop for the DUE's submit pass,
 * and clock_sets_detect_cpu, which picks the AVX2 loop where the CPU has it.
 * (The paper's single-ring CLOCK, policy `clock`, is cache_clock.c.)
 *
 * Set-associative CLOCK.  The capacity is split into nsets = ceil(capacity /
 * ways) sets of `ways` (or ways - 1) entries; a fingerprint belongs to set
 * fastrange(fmix64(fp), nsets), and each set is the paper's CLOCK ring: a
 * key array in ring order, one mark bit per entry (a uint32 per set), a hand
 * and a fill count (a byte each per set).  Slots [0, fill) of a set are
 * occupied, so no value is reserved for "empty" and fingerprint 0 is an
 * ordinary key.  With capacity <= ways there is one set: the global CLOCK.
 * Memory: capacity * 8 + nsets * 6 bytes (8.19 bytes per entry at 32 ways).
 */
#include "cache_kernel.h"

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

/* A new entry starts unmarked (documented in clock_sets.py and docs/caches.md). */
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
void clock_sets_detect_cpu(void)
{
    __builtin_cpu_init();
    have_avx2 = __builtin_cpu_supports("avx2");
}
#else
#define clock_loop clock_loop_scalar
void clock_sets_detect_cpu(void)
{
}
#endif

int clock_sets_probe(PyObject *cache, const uint64_t *fps, uint8_t *hits, Py_ssize_t n)
{
    if (!PyObject_TypeCheck(cache, &ClockSetsType) || ((ClockObject *)cache)->keys == NULL)
        return 0;
    clock_loop((ClockObject *)cache, fps, hits, n);
    return 1;
}

static int Clock_init(ClockObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"capacity", "ways", NULL};
    unsigned long long capacity, ways;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "KK", kwlist, &capacity, &ways))
        return -1;
    if (self->keys != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "ClockSetsKernel is already initialised");
        return -1;
    }
    if (capacity < 1 || capacity >= (1ULL << 40) || ways < 1 || ways > CLOCK_MAX_WAYS) {
        PyErr_SetString(PyExc_ValueError, "ClockSetsKernel needs 1 <= capacity < 2**40 and 1 <= ways <= 32");
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

DEFINE_COUNTERS(Clock, ClockObject)
U64_GETTER(Clock_get_size, ClockObject, size)
U64_GETTER(Clock_get_nsets, ClockObject, nsets)
U64_GETTER(Clock_get_ways, ClockObject, ways)

static PyMethodDef Clock_methods[] = {
    REQUEST_METHODS(Clock, CACHED_DOC),
    {"keys", (PyCFunction)Clock_keys, METH_NOARGS, "Resident fingerprints, set by set in ring order."},
    {"set_state", (PyCFunction)Clock_set_state, METH_O, "set_state(b) -> (keys, marks, hand) of set b."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Clock_getset[] = {
    COUNTER_GETSETS(Clock, "Most entries held.", "Entries held now."),
    {"nsets", (getter)Clock_get_nsets, NULL, "Number of sets (CLOCK rings).", NULL},
    {"ways", (getter)Clock_get_ways, NULL, "Most entries per set.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject ClockSetsType =
    KERNEL_TYPE("ClockSetsKernel", ClockObject, Clock, "Set-associative CLOCK (see clock_sets.py).");

