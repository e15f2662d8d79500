/*
 * ClockKernel(capacity): the paper's CLOCK on one ring over the whole
 * capacity, the kernel of the `clock` cache policy (crawler/cache/clock.py
 * has its pure-Python twin).  Also clock_probe, its batch loop for the DUE's
 * submit pass.  (The set-associative variant, `clock-sets`, is
 * cache_clock_sets.c.)
 *
 * The ring: slot p holds keys[p] and mark bit p of `marks`.  While the cache
 * is not full a miss takes slot `size` (slots fill from 0 up, the hand stays
 * at 0).  A hit sets its slot's mark.  A miss on a full cache moves the hand
 * round the ring, clearing marks, to the first unmarked slot; that slot
 * takes the new key, unmarked, and the hand moves one past it (the
 * convention of the OS page-replacement CLOCK: the new key is the last the
 * hand will reach).  A position index (cache_kernel.h) finds a key's slot.
 * Memory: 8 bytes of key, 1 bit of mark and 8-16 bytes of index per entry.
 */
#include "cache_kernel.h"

typedef struct {
    PyObject_HEAD
    uint64_t *keys;   /* capacity fingerprints in ring order */
    uint64_t *marks;  /* bit p of word p / 64 = mark of slot p */
    PosIndex index;
    uint64_t capacity;
    uint64_t size;
    uint64_t hits;
    uint64_t misses;
    uint64_t hand;    /* the slot the hand points at */
} ClockRingObject;

/* A new entry starts unmarked (documented in clock.py and docs/caches.md). */
#define RING_INITIAL_MARK 0
#define RING_WORDS(capacity) (((capacity) + 63) / 64)

static inline void ring_set_mark(ClockRingObject *c, uint64_t p, uint64_t mark)
{
    c->marks[p >> 6] = (c->marks[p >> 6] & ~(1ULL << (p & 63))) | (mark << (p & 63));
}

/* The victim of a miss on a full ring: the first unmarked slot from the
 * hand on, clearing the marks passed, a 64-slot word at a time.  Ends within
 * one lap plus a word: a lap clears every mark. */
static inline uint64_t ring_sweep(ClockRingObject *c)
{
    const uint64_t last = (c->capacity - 1) >> 6;
    const uint64_t tail = c->capacity & 63;  /* slots in the last word, 0 = 64 */
    uint64_t h = c->hand;
    for (;;) {
        const uint64_t w = h >> 6, from = ~0ULL << (h & 63);
        uint64_t unmarked = ~c->marks[w] & from;
        if (w == last && tail)
            unmarked &= (1ULL << tail) - 1;
        if (unmarked) {
            const uint64_t bit = (uint64_t)__builtin_ctzll(unmarked);
            c->marks[w] &= ~(from & ((1ULL << bit) - 1));
            return (w << 6) | bit;
        }
        c->marks[w] &= ~from;
        h = w == last ? 0 : (w + 1) << 6;
    }
}

/* Hot path: one request.  Returns 1 on a hit. */
static inline int ring_access(ClockRingObject *c, uint64_t fp)
{
    uint64_t i = pos_find(&c->index, c->keys, 1, fp);
    uint32_t s = c->index.slots[i];
    if (s != 0) {
        ring_set_mark(c, s - 1, 1);
        c->hits++;
        return 1;
    }
    c->misses++;
    if (c->size < c->capacity) {
        uint64_t p = c->size++;
        c->keys[p] = fp;
        ring_set_mark(c, p, RING_INITIAL_MARK);
        c->index.slots[i] = (uint32_t)(p + 1);
        return 0;
    }
    uint64_t p = ring_sweep(c);
    pos_delete(&c->index, c->keys, 1, pos_find(&c->index, c->keys, 1, c->keys[p]));
    c->keys[p] = fp;
    ring_set_mark(c, p, RING_INITIAL_MARK);
    c->index.slots[pos_find(&c->index, c->keys, 1, fp)] = (uint32_t)(p + 1);
    c->hand = p + 1 == c->capacity ? 0 : p + 1;
    return 0;
}

static int ClockRing_init(ClockRingObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"capacity", NULL};
    unsigned long long capacity;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "K", kwlist, &capacity))
        return -1;
    if (self->keys != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "ClockKernel is already initialised");
        return -1;
    }
    if (capacity < 1 || capacity >= (1ULL << 31)) {
        PyErr_SetString(PyExc_ValueError, "ClockKernel needs 1 <= capacity < 2**31");
        return -1;
    }
    uint64_t m = pos_index_size(capacity);
    self->keys = alloc_zeroed((size_t)capacity, 8);
    self->marks = alloc_zeroed((size_t)RING_WORDS(capacity), 8);
    self->index.slots = alloc_zeroed((size_t)m, 4);
    if (!self->keys || !self->marks || !self->index.slots) {
        PyMem_RawFree(self->keys);
        PyMem_RawFree(self->marks);
        PyMem_RawFree(self->index.slots);
        self->keys = NULL;
        return -1;
    }
    self->index.mask = m - 1;
    self->capacity = capacity;
    self->size = self->hits = self->misses = self->hand = 0;
    return 0;
}

static void ClockRing_dealloc(ClockRingObject *self)
{
    PyMem_RawFree(self->keys);
    PyMem_RawFree(self->marks);
    PyMem_RawFree(self->index.slots);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

DEFINE_SINGLE(ClockRing_check_and_add, ClockRingObject, ring_access, self->keys != NULL)
#define ring_prefetch(c, fp) pos_prefetch(&(c)->index, (fp))
DEFINE_LOOP(ring_loop, ClockRingObject, ring_access, ring_prefetch)
DEFINE_BATCH(ClockRing_check_and_add_many, ClockRingObject, ring_loop, self->keys != NULL)

int clock_probe(PyObject *cache, const uint64_t *fps, uint8_t *hits, Py_ssize_t n)
{
    if (!PyObject_TypeCheck(cache, &ClockType) || ((ClockRingObject *)cache)->keys == NULL)
        return 0;
    ring_loop((ClockRingObject *)cache, fps, hits, n);
    return 1;
}

/* The ring: (keys in slot order, marks, hand). */
static PyObject *ClockRing_ring_state(ClockRingObject *self, PyObject *Py_UNUSED(ignored))
{
    if (self->keys == NULL)
        return NOT_READY(self);
    PyObject *keys = PyList_New((Py_ssize_t)self->size), *marks = PyList_New((Py_ssize_t)self->size);
    if (keys == NULL || marks == NULL) {
        Py_XDECREF(keys);
        Py_XDECREF(marks);
        return NULL;
    }
    for (uint64_t p = 0; p < self->size; p++) {
        PyObject *v = PyLong_FromUnsignedLongLong(self->keys[p]);
        if (v == NULL) {
            Py_DECREF(keys);
            Py_DECREF(marks);
            return NULL;
        }
        PyList_SET_ITEM(keys, (Py_ssize_t)p, v);
        PyObject *mk = ((self->marks[p >> 6] >> (p & 63)) & 1) ? Py_True : Py_False;
        Py_INCREF(mk);
        PyList_SET_ITEM(marks, (Py_ssize_t)p, mk);
    }
    return Py_BuildValue("(NNK)", keys, marks, (unsigned long long)self->hand);
}

/* Resident fingerprints in slot order. */
static PyObject *ClockRing_keys(ClockRingObject *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *state = ClockRing_ring_state(self, NULL);
    if (state == NULL)
        return NULL;
    PyObject *keys = PyTuple_GET_ITEM(state, 0);
    Py_INCREF(keys);
    Py_DECREF(state);
    return keys;
}

static PyObject *ClockRing_get_buffer_bytes(ClockRingObject *self, void *Py_UNUSED(c))
{
    return PyLong_FromUnsignedLongLong(self->capacity * 8 + RING_WORDS(self->capacity) * 8
                                       + (self->index.mask + 1) * 4);
}

DEFINE_COUNTERS(ClockRing, ClockRingObject)
U64_GETTER(ClockRing_get_size, ClockRingObject, size)

static PyMethodDef ClockRing_methods[] = {
    REQUEST_METHODS(ClockRing, CACHED_DOC),
    {"keys", (PyCFunction)ClockRing_keys, METH_NOARGS, "Resident fingerprints in slot order."},
    {"ring_state", (PyCFunction)ClockRing_ring_state, METH_NOARGS,
     "ring_state() -> (keys in slot order, marks, hand)."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef ClockRing_getset[] = {
    COUNTER_GETSETS(ClockRing, "Most entries held.", "Entries held now."),
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject ClockType =
    KERNEL_TYPE("ClockKernel", ClockRingObject, ClockRing, "The paper's CLOCK on one ring (see clock.py).");
