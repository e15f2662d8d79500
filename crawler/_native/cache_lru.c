/*
 * LruKernel(capacity): exact LRU, the kernel of the `lru` cache policy
 * (crawler/cache/lru.py has its pure-Python twin): entries with their list
 * links in one array, and a position index to find them.  Also lru_probe,
 * its batch loop for the DUE's submit pass.
 */
#include "cache_kernel.h"

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

DEFINE_COUNTERS(Lru, LruObject)
U64_GETTER(Lru_get_size, LruObject, size)

static PyMethodDef Lru_methods[] = {
    REQUEST_METHODS(Lru, CACHED_DOC),
    {"keys", (PyCFunction)Lru_keys, METH_NOARGS, "Resident fingerprints, least recently used first."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Lru_getset[] = {
    COUNTER_GETSETS(Lru, "Most entries held.", "Entries held now."),
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject LruType =
    KERNEL_TYPE("LruKernel", LruObject, Lru, "Exact LRU: key array, circular doubly linked list, position index.");

int lru_probe(PyObject *cache, const uint64_t *fps, uint8_t *hits, Py_ssize_t n)
{
    if (!PyObject_TypeCheck(cache, &LruType) || ((LruObject *)cache)->e == NULL)
        return 0;
    lru_loop((LruObject *)cache, fps, hits, n);
    return 1;
}
