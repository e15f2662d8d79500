/*
 * SieveKernel(capacity): SIEVE (Zhang et al., NSDI '24), request for request
 * the same as crawler/cache/sieve.py (its pure-Python twin and the reference;
 * tests compare the two): one FIFO queue, a visited bit per entry, a hand.
 *
 * A hit sets the entry's visited bit.  A miss inserts at the head, unvisited;
 * on a full cache it first evicts: the hand (the tail when it has no
 * position) walks toward the head clearing visited bits, wrapping to the
 * tail, to the first unvisited entry; that entry leaves and the hand stays at
 * the entry just newer than it (none when the victim was the head).  The
 * evicted entry's slot takes the new key, so slots never exceed capacity.
 *
 * Memory: key 8 B, two int32 queue links, a visited byte and a uint32
 * position index (load <= 1/2) per entry: 25-33 B per entry.
 */
#include "cache_kernel.h"

#define SIEVE_NONE (-1)

typedef struct {
    PyObject_HEAD
    uint64_t *keys;    /* slot -> fingerprint */
    int32_t *newer;    /* slot -> next slot toward the head, or SIEVE_NONE */
    int32_t *older;    /* slot -> next slot toward the tail, or SIEVE_NONE */
    uint8_t *visited;
    PosIndex index;
    uint64_t capacity;
    uint64_t size;
    uint64_t hits;
    uint64_t misses;
    int32_t head, tail, hand;
} SieveObject;

static inline void sieve_unlink(SieveObject *c, int32_t slot)
{
    int32_t newer = c->newer[slot], older = c->older[slot];
    if (newer == SIEVE_NONE)
        c->head = older;
    else
        c->older[newer] = older;
    if (older == SIEVE_NONE)
        c->tail = newer;
    else
        c->newer[older] = newer;
}

static inline void sieve_push_head(SieveObject *c, int32_t slot)
{
    c->older[slot] = c->head;
    c->newer[slot] = SIEVE_NONE;
    if (c->head == SIEVE_NONE)
        c->tail = slot;
    else
        c->newer[c->head] = slot;
    c->head = slot;
}

/* Moves the hand to the first unvisited entry, unlinks it and returns its slot. */
static inline int32_t sieve_evict(SieveObject *c)
{
    int32_t slot = c->hand != SIEVE_NONE ? c->hand : c->tail;
    while (c->visited[slot]) {
        c->visited[slot] = 0;
        slot = c->newer[slot];
        if (slot == SIEVE_NONE)
            slot = c->tail;
    }
    c->hand = c->newer[slot];
    sieve_unlink(c, slot);
    pos_delete(&c->index, c->keys, 1, pos_find(&c->index, c->keys, 1, c->keys[slot]));
    return slot;
}

/* Hot path: one request.  Returns 1 on a hit. */
static inline int sieve_access(SieveObject *c, uint64_t fp)
{
    uint64_t i = pos_find(&c->index, c->keys, 1, fp);
    uint32_t s = c->index.slots[i];
    if (s != 0) {
        c->visited[s - 1] = 1;
        c->hits++;
        return 1;
    }
    c->misses++;
    int32_t slot;
    if (c->size < c->capacity) {
        slot = (int32_t)c->size++;
    } else {
        slot = sieve_evict(c);
        i = pos_find(&c->index, c->keys, 1, fp);   /* the deletion may have moved fp's slot */
    }
    c->keys[slot] = fp;
    c->index.slots[i] = (uint32_t)slot + 1;
    c->visited[slot] = 0;
    sieve_push_head(c, slot);
    return 0;
}

static int Sieve_init(SieveObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"capacity", NULL};
    unsigned long long capacity;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "K", kwlist, &capacity))
        return -1;
    if (self->keys != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "SieveKernel is already initialised");
        return -1;
    }
    if (capacity < 1 || capacity >= (1ULL << 31)) {
        PyErr_SetString(PyExc_ValueError, "SieveKernel needs 1 <= capacity < 2**31");
        return -1;
    }
    uint64_t m = pos_index_size(capacity);
    self->keys = alloc_zeroed((size_t)capacity, 8);
    self->newer = alloc_zeroed((size_t)capacity, 4);
    self->older = alloc_zeroed((size_t)capacity, 4);
    self->visited = alloc_zeroed((size_t)capacity, 1);
    self->index.slots = alloc_zeroed((size_t)m, 4);
    if (!self->keys || !self->newer || !self->older || !self->visited || !self->index.slots) {
        PyMem_RawFree(self->keys);
        PyMem_RawFree(self->newer);
        PyMem_RawFree(self->older);
        PyMem_RawFree(self->visited);
        PyMem_RawFree(self->index.slots);
        self->keys = NULL;
        return -1;
    }
    self->index.mask = m - 1;
    self->capacity = capacity;
    self->size = self->hits = self->misses = 0;
    self->head = self->tail = self->hand = SIEVE_NONE;
    return 0;
}

static void Sieve_dealloc(SieveObject *self)
{
    PyMem_RawFree(self->keys);
    PyMem_RawFree(self->newer);
    PyMem_RawFree(self->older);
    PyMem_RawFree(self->visited);
    PyMem_RawFree(self->index.slots);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

DEFINE_SINGLE(Sieve_check_and_add, SieveObject, sieve_access, self->keys != NULL)
#define sieve_prefetch(c, fp) pos_prefetch(&(c)->index, (fp))
DEFINE_LOOP(sieve_loop, SieveObject, sieve_access, sieve_prefetch)
DEFINE_BATCH(Sieve_check_and_add_many, SieveObject, sieve_loop, self->keys != NULL)

/* The queue, tail (oldest) to head (newest): (keys, visited bits). */
static PyObject *Sieve_queue(SieveObject *self, PyObject *Py_UNUSED(ignored))
{
    if (self->keys == NULL)
        return NOT_READY(self);
    PyObject *keys = PyList_New(0), *visited = PyList_New(0);
    if (keys == NULL || visited == NULL)
        goto fail;
    for (int32_t slot = self->tail; slot != SIEVE_NONE; slot = self->newer[slot]) {
        PyObject *v = PyLong_FromUnsignedLongLong(self->keys[slot]);
        if (v == NULL || PyList_Append(keys, v) < 0) {
            Py_XDECREF(v);
            goto fail;
        }
        Py_DECREF(v);
        if (PyList_Append(visited, self->visited[slot] ? Py_True : Py_False) < 0)
            goto fail;
    }
    return Py_BuildValue("(NN)", keys, visited);
fail:
    Py_XDECREF(keys);
    Py_XDECREF(visited);
    return NULL;
}

/* Item `which` of Sieve_queue's pair: 0 the keys, 1 the visited bits. */
static PyObject *sieve_queue_part(SieveObject *self, Py_ssize_t which)
{
    PyObject *state = Sieve_queue(self, NULL);
    if (state == NULL)
        return NULL;
    PyObject *part = PyTuple_GET_ITEM(state, which);
    Py_INCREF(part);
    Py_DECREF(state);
    return part;
}

/* Resident fingerprints, tail (oldest) to head (newest). */
static PyObject *Sieve_keys(SieveObject *self, PyObject *Py_UNUSED(ignored)) { return sieve_queue_part(self, 0); }

/* The visited bits in the order of keys(). */
static PyObject *Sieve_visited(SieveObject *self, PyObject *Py_UNUSED(ignored)) { return sieve_queue_part(self, 1); }

static PyObject *Sieve_get_buffer_bytes(SieveObject *self, void *Py_UNUSED(c))
{
    return PyLong_FromUnsignedLongLong(self->capacity * (8 + 4 + 4 + 1) + (self->index.mask + 1) * 4);
}

DEFINE_COUNTERS(Sieve, SieveObject)
U64_GETTER(Sieve_get_size, SieveObject, size)

static PyMethodDef Sieve_methods[] = {
    REQUEST_METHODS(Sieve, CACHED_DOC),
    {"keys", (PyCFunction)Sieve_keys, METH_NOARGS, "Resident fingerprints, tail (oldest) to head (newest)."},
    {"visited", (PyCFunction)Sieve_visited, METH_NOARGS, "The visited bits in the order of keys()."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Sieve_getset[] = {
    COUNTER_GETSETS(Sieve, "Most entries held.", "Entries held now."),
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject SieveType = KERNEL_TYPE("SieveKernel", SieveObject, Sieve, "SIEVE (see crawler/cache/sieve.py).");
