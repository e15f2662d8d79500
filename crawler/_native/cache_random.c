/*
 * RandomKernel(capacity, seed): the kernel of the `random` cache policy
 * (crawler/cache/random_policy.py has its pure-Python twin): a key array,
 * a position index, and a victim drawn by splitmix64 from the seed, so runs
 * are reproducible.  Also random_probe, its batch loop for the DUE's submit
 * pass.
 */
#include "cache_kernel.h"

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

DEFINE_COUNTERS(Random, RandomObject)
U64_GETTER(Random_get_size, RandomObject, size)

static PyMethodDef Random_methods[] = {
    REQUEST_METHODS(Random, CACHED_DOC),
    {"keys", (PyCFunction)Random_keys, METH_NOARGS, "Resident fingerprints by position."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Random_getset[] = {
    COUNTER_GETSETS(Random, "Most entries held.", "Entries held now."),
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject RandomType =
    KERNEL_TYPE("RandomKernel", RandomObject, Random,
                "Random replacement driven by splitmix64 (see random_policy.py).");

int random_probe(PyObject *cache, const uint64_t *fps, uint8_t *hits, Py_ssize_t n)
{
    if (!PyObject_TypeCheck(cache, &RandomType) || ((RandomObject *)cache)->keys == NULL)
        return 0;
    random_loop((RandomObject *)cache, fps, hits, n);
    return 1;
}
