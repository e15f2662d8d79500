/*
 * SetKernel(capacity, insert): the hash set behind the `infinite` (every
 * miss inserts) and `static` (frozen after add_many) cache policies
 * (crawler/cache/hashset.py has its pure-Python twin).
 */
#include "cache_kernel.h"

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

DEFINE_COUNTERS(Set, SetObject)

static PyMethodDef Set_methods[] = {
    REQUEST_METHODS(Set, "check_and_add(fp) -> bool: True if fp is in the set; a miss inserts fp unless "
                         "frozen."),
    {"add_many", (PyCFunction)Set_add_many, METH_O, "Add fingerprints without counting them."},
    {"keys", (PyCFunction)Set_keys, METH_NOARGS, "Resident fingerprints (0 first, then table order)."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Set_getset[] = {
    COUNTER_GETSETS(Set, "The capacity given at construction.", "Fingerprints held now."),
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject SetType =
    KERNEL_TYPE("SetKernel", SetObject, Set, "Growable hash set of fingerprints (INFINITE, STATIC).");

