/*
 * NextUseKernel(never): next-use times of a trace fed backwards in chunks
 * (the out-of-core build of crawler/replay/min_streaming.py).
 *
 * Why: MIN needs, for every request, when its fingerprint is asked next.  The
 * in-memory replay finds it with one sort of the whole trace; out of core the
 * trace is first split by fingerprint into buckets on disk, and each bucket
 * is read from its end: a table maps each fingerprint to the position of its
 * earliest request seen so far (that is, its next request), so memory is the
 * bucket's distinct fingerprints, not its length, and a fingerprint asked
 * millions of times costs one entry.
 *
 * back(fps, positions, out): for k from the end of the chunk to its start,
 * out[k] = the table's position for fps[k], or `never` if none; then the
 * table's position for fps[k] becomes positions[k].  Chunks are fed from the
 * bucket's last to its first.  Open addressing with linear probing, load
 * <= 1/2, doubled when full: 32 B per distinct fingerprint at worst.
 */
#include "cache_kernel.h"

typedef struct {
    PyObject_HEAD
    uint64_t *keys;
    int64_t *pos;        /* -1: empty slot */
    uint64_t mask, size;
    int64_t never;
} NextUseObject;

static int next_use_alloc(NextUseObject *c, uint64_t slots)
{
    c->keys = PyMem_RawMalloc((size_t)slots * 8);
    c->pos = PyMem_RawMalloc((size_t)slots * 8);
    if (c->keys == NULL || c->pos == NULL) {
        PyMem_RawFree(c->keys);
        PyMem_RawFree(c->pos);
        c->keys = NULL;
        c->pos = NULL;
        PyErr_NoMemory();
        return -1;
    }
    memset(c->pos, 0xFF, (size_t)slots * 8);
    c->mask = slots - 1;
    return 0;
}

static int next_use_grow(NextUseObject *c)
{
    uint64_t *keys = c->keys, old_slots = c->mask + 1;
    int64_t *pos = c->pos;
    if (next_use_alloc(c, 2 * old_slots) < 0) {
        c->keys = keys;
        c->pos = pos;
        c->mask = old_slots - 1;
        return -1;
    }
    for (uint64_t i = 0; i < old_slots; i++) {
        if (pos[i] < 0)
            continue;
        uint64_t j = fmix64(keys[i]) & c->mask;
        while (c->pos[j] >= 0)
            j = (j + 1) & c->mask;
        c->keys[j] = keys[i];
        c->pos[j] = pos[i];
    }
    PyMem_RawFree(keys);
    PyMem_RawFree(pos);
    return 0;
}

static int NextUse_init(NextUseObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"never", NULL};
    long long never;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "L", kwlist, &never))
        return -1;
    if (self->keys != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "NextUseKernel is already initialised");
        return -1;
    }
    if (never < 0) {
        PyErr_SetString(PyExc_ValueError, "NextUseKernel needs never >= 0");
        return -1;
    }
    self->never = never;
    self->size = 0;
    return next_use_alloc(self, 1024);
}

static void NextUse_dealloc(NextUseObject *self)
{
    PyMem_RawFree(self->keys);
    PyMem_RawFree(self->pos);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *NextUse_back(NextUseObject *self, PyObject *args)
{
    PyObject *fps_obj, *pos_obj, *out_obj;
    if (self->keys == NULL)
        return NOT_READY(self);
    if (!PyArg_ParseTuple(args, "OOO", &fps_obj, &pos_obj, &out_obj))
        return NULL;
    Py_buffer in, at, out;
    if (get_array(fps_obj, &in, 8, 0, 0, "fps (uint64)") < 0)
        return NULL;
    Py_ssize_t n = in.len / 8;
    if (get_array(pos_obj, &at, 8, n, 0, "positions (int64, one per fingerprint)") < 0) {
        PyBuffer_Release(&in);
        return NULL;
    }
    if (get_array(out_obj, &out, 8, n, 1, "out (int64, one per fingerprint)") < 0) {
        PyBuffer_Release(&in);
        PyBuffer_Release(&at);
        return NULL;
    }
    const uint64_t *fps = (const uint64_t *)in.buf;
    const int64_t *positions = (const int64_t *)at.buf;
    int64_t *next = (int64_t *)out.buf;
    int failed = 0;
    for (Py_ssize_t k = n - 1; k >= 0; k--) {
        if (2 * (self->size + 1) > self->mask + 1 && next_use_grow(self) < 0) {
            failed = 1;
            break;
        }
        uint64_t fp = fps[k], i = fmix64(fp) & self->mask;
        while (self->pos[i] >= 0 && self->keys[i] != fp)
            i = (i + 1) & self->mask;
        if (self->pos[i] >= 0) {
            next[k] = self->pos[i];
        } else {
            next[k] = self->never;
            self->keys[i] = fp;
            self->size++;
        }
        self->pos[i] = positions[k];
    }
    PyBuffer_Release(&in);
    PyBuffer_Release(&at);
    PyBuffer_Release(&out);
    if (failed)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *NextUse_get_size(NextUseObject *self, void *Py_UNUSED(c))
{
    return PyLong_FromUnsignedLongLong(self->size);
}

static PyObject *NextUse_get_buffer_bytes(NextUseObject *self, void *Py_UNUSED(c))
{
    return PyLong_FromUnsignedLongLong((self->mask + 1) * 16);
}

static PyObject *NextUse_get_never(NextUseObject *self, void *Py_UNUSED(c))
{
    return PyLong_FromLongLong(self->never);
}

static PyMethodDef NextUse_methods[] = {
    {"back", (PyCFunction)NextUse_back, METH_VARARGS,
     "back(fps, positions, out): out[k] = the position of fps[k]'s next request (or never), chunks fed "
     "from the last to the first."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef NextUse_getset[] = {
    {"size", (getter)NextUse_get_size, NULL, "Distinct fingerprints seen.", NULL},
    {"never", (getter)NextUse_get_never, NULL, "The next-use time of a last request.", NULL},
    {"buffer_bytes", (getter)NextUse_get_buffer_bytes, NULL, "Bytes of the table.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject NextUseType = KERNEL_TYPE("NextUseKernel", NextUseObject, NextUse,
                                       "Next-use times of a trace fed backwards in chunks (next_use.c).");
