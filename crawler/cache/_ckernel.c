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
 * Function:
 *   belady(next_use, capacity, out)  MIN's hit sequence, offline
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef unsigned __int128 u128;

/* Cached numpy callables (set once at module init). */
static PyObject *np_empty = NULL;
static PyObject *np_ascontiguousarray = NULL;
static PyObject *np_uint64 = NULL;
static PyObject *np_bool = NULL;

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

/* The loop of a batch: dst[i] = ACCESS(self, src[i]), prefetching ahead. */
#define DEFINE_LOOP(NAME, TYPE, ACCESS, PREFETCH)                               \
    static void NAME(TYPE *self, const uint64_t *src, uint8_t *dst, Py_ssize_t n) \
    {                                                                          \
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

/* Hot path: one request. Returns 1 on a hit.  `wide` selects the lookup:
 * 0 stops at the first match (best for scalar code); 1 compares all 32 ways
 * without branches, which the compiler turns into a few AVX2 instructions
 * (the keys array has CLOCK_MAX_WAYS entries of padding so the last set can
 * be read whole; ways past the fill count are masked off). */
static inline __attribute__((always_inline)) int clock_access_impl(ClockObject *c, uint64_t fp, const int wide)
{
    const uint64_t b = fastrange(fmix64(fp), c->nsets);
    const uint64_t start = b * c->base + (b < c->extra ? b : c->extra);
    const uint32_t ways = (uint32_t)(c->base + (b < c->extra));
    uint64_t *keys = c->keys + start;
    const uint32_t fill = c->fills[b];
    uint32_t found = 0;
    if (wide) {
        for (uint32_t i = 0; i < CLOCK_MAX_WAYS; i++)
            found |= (uint32_t)(keys[i] == fp) << i;
        found &= fill == 32 ? 0xFFFFFFFFu : ((1u << fill) - 1);
    } else {
        for (uint32_t i = 0; i < fill; i++) {
            if (keys[i] == fp) {
                found = 1u << i;
                break;
            }
        }
    }
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

static inline int clock_access(ClockObject *c, uint64_t fp)
{
    return clock_access_impl(c, fp, 0);
}

static inline void clock_prefetch(const ClockObject *c, uint64_t fp)
{
    const uint64_t b = fastrange(fmix64(fp), c->nsets);
    const uint64_t *keys = c->keys + b * c->base + (b < c->extra ? b : c->extra);
    __builtin_prefetch(keys);
    __builtin_prefetch(keys + 8);
    __builtin_prefetch(keys + 16);
    __builtin_prefetch(keys + 24);
}

DEFINE_LOOP(clock_loop_scalar, ClockObject, clock_access, clock_prefetch)

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define clock_access_wide(c, fp) clock_access_impl((c), (fp), 1)
__attribute__((target("avx2"))) DEFINE_LOOP(clock_loop_avx2, ClockObject, clock_access_wide, clock_prefetch)
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
    self->keys = alloc_zeroed((size_t)(capacity + CLOCK_MAX_WAYS), 8); /* + padding, see clock_access_impl */
    self->marks = alloc_zeroed((size_t)nsets, 4);
    self->hands = alloc_zeroed((size_t)nsets, 1);
    self->fills = alloc_zeroed((size_t)nsets, 1);
    if (!self->keys || !self->marks || !self->hands || !self->fills) {
        PyMem_RawFree(self->keys);
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
    PyMem_RawFree(self->keys);
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
    return PyLong_FromUnsignedLongLong((self->capacity + CLOCK_MAX_WAYS) * 8 + self->nsets * (4 + 1 + 1));
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

/* zlib's crc32(crc, p, n): chaining calls equals one call over the concatenation. */
static uint32_t crc32_update(uint32_t crc, const uint8_t *p, size_t n)
{
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
    return size;
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
    Py_buffer in, buf, win;
    PyObject *owner;
    if (get_u64_view(fps_obj, &in, &owner) < 0)
        return NULL;
    PyObject *result = NULL;
    uint8_t hits_stack[DUE_STACK_URLS];
    const char *ptrs_stack[DUE_STACK_URLS];
    Py_ssize_t lens_stack[DUE_STACK_URLS];
    uint8_t *hits = hits_stack;
    const char **ptrs = ptrs_stack;
    Py_ssize_t *lens = lens_stack;
    int have_buf = 0, have_win = 0;
    Py_ssize_t count = in.len / 8, first = PyList_GET_SIZE(buf_urls);
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
    if (count > DUE_STACK_URLS) {
        hits = PyMem_Malloc((size_t)count);
        ptrs = PyMem_Malloc((size_t)count * sizeof(*ptrs));
        lens = PyMem_Malloc((size_t)count * sizeof(*lens));
        if (hits == NULL || ptrs == NULL || lens == NULL) {
            PyErr_NoMemory();
            goto done;
        }
    }
    if (due_probe(cache, fps_obj, (const uint64_t *)in.buf, count, hits) < 0)
        goto done;
    const uint64_t *src = (const uint64_t *)in.buf;
    uint64_t *dst = (uint64_t *)buf.buf + n;
    Py_ssize_t m = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (hits[i])
            continue;
        dst[m++] = src[i];
        if (PyList_Append(buf_urls, PyList_GET_ITEM(urls, i)) < 0) {
            PyList_SetSlice(buf_urls, first, PY_SSIZE_T_MAX, NULL);
            goto done;
        }
    }
    Py_ssize_t size = 0;
    if (m) {
        uint8_t *window = NULL;
        Py_ssize_t window_len = 0;
        if (window_obj != Py_None) {
            if (PyObject_GetBuffer(window_obj, &win, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
                PyList_SetSlice(buf_urls, first, PY_SSIZE_T_MAX, NULL);
                goto done;
            }
            have_win = 1;
            window = (uint8_t *)win.buf;
            window_len = win.len;
        }
        size = due_record(buf_urls, first, dst, m, window, window_len, pos, ptrs, lens);
    }
    result = Py_BuildValue("(nn)", m, size);
    if (result == NULL)
        PyList_SetSlice(buf_urls, first, PY_SSIZE_T_MAX, NULL);
done:
    if (hits != hits_stack)
        PyMem_Free(hits);
    if (ptrs != ptrs_stack)
        PyMem_Free((void *)ptrs);
    if (lens != lens_stack)
        PyMem_Free(lens);
    if (have_win)
        PyBuffer_Release(&win);
    if (have_buf)
        PyBuffer_Release(&buf);
    PyBuffer_Release(&in);
    Py_XDECREF(owner);
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
    crc32_init();
    PyObject *numpy = PyImport_ImportModule("numpy");
    if (numpy == NULL)
        return NULL;
    np_empty = PyObject_GetAttrString(numpy, "empty");
    np_ascontiguousarray = PyObject_GetAttrString(numpy, "ascontiguousarray");
    np_uint64 = PyObject_GetAttrString(numpy, "uint64");
    np_bool = PyObject_GetAttrString(numpy, "bool_");
    Py_DECREF(numpy);
    if (!np_empty || !np_ascontiguousarray || !np_uint64 || !np_bool)
        return NULL;
    PyObject *m = PyModule_Create(&ckernel_module);
    if (m == NULL)
        return NULL;
    if (add_type(m, &ClockType, "ClockKernel") < 0 || add_type(m, &LruType, "LruKernel") < 0 ||
        add_type(m, &RandomType, "RandomKernel") < 0 || add_type(m, &SetType, "SetKernel") < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
