/*
 * belady(next_use, capacity, out): MIN's hit sequence for a whole trace,
 * offline (Belady's clairvoyant policy, the `min` cache policy and the
 * replay's lower bound; crawler/cache/min.py has the pure-Python twin).
 */
#include "cache_kernel.h"

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

PyObject *belady(PyObject *Py_UNUSED(module), PyObject *args)
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



/*
 * BeladyKernel(capacity, never): the same policy as belady(), fed a trace's
 * next-use times chunk by chunk (the streaming replay, crawler/replay/
 * min_streaming.py), so its memory is O(capacity) whatever the trace's length.
 *
 * belady()'s resident[] (a byte per request of the whole trace) becomes a set
 * of the resident entries' next request times, at most `capacity` of them:
 * request t hits iff t is in the set.  Request times count from 0 over every
 * chunk fed; `never` is the trace's length (a next-use time >= never means
 * never again, the convention of stack.next_use).  The set is open addressing
 * with linear probing (-1 empty, load <= 1/2) and backward-shift deletion, so
 * it never fills with tombstones.  Memory: 16 B of heap and 8-16 B of set per
 * entry of capacity.
 */
typedef struct {
    PyObject_HEAD
    int64_t *heap;        /* max-heap of resident entries' next request times (and stale ones) */
    int64_t *set;         /* next request times of the resident entries */
    uint64_t set_mask;
    Py_ssize_t heap_len, heap_max;
    uint64_t capacity, live, requests, misses;
    int64_t never, t;     /* t: the time of the next request fed */
} BeladyObject;

static inline int set_add(BeladyObject *c, int64_t key)
{
    uint64_t m = c->set_mask, i = fmix64((uint64_t)key) & m;
    while (c->set[i] >= 0)
        i = (i + 1) & m;
    c->set[i] = key;
    return 0;
}

/* Removes key; 1 if it was there. */
static inline int set_take(BeladyObject *c, int64_t key)
{
    uint64_t m = c->set_mask, i = fmix64((uint64_t)key) & m;
    while (c->set[i] != key) {
        if (c->set[i] < 0)
            return 0;
        i = (i + 1) & m;
    }
    for (uint64_t j = (i + 1) & m; c->set[j] >= 0; j = (j + 1) & m) {
        uint64_t home = fmix64((uint64_t)c->set[j]) & m;
        int stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
        if (!stays) {
            c->set[i] = c->set[j];
            i = j;
        }
    }
    c->set[i] = -1;
    return 1;
}

static int Belady_init(BeladyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"capacity", "never", NULL};
    unsigned long long capacity, never;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "KK", kwlist, &capacity, &never))
        return -1;
    if (self->heap != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "BeladyKernel is already initialised");
        return -1;
    }
    if (capacity < 1 || never < 1 || never >= (1ULL << 61)) {
        PyErr_SetString(PyExc_ValueError, "BeladyKernel needs capacity >= 1 and 1 <= never < 2**61");
        return -1;
    }
    uint64_t cap = capacity < never ? capacity : never, m = 8;
    while (m < 2 * cap)
        m <<= 1;
    self->heap_max = (Py_ssize_t)(2 * cap + 2);
    self->heap = PyMem_RawMalloc((size_t)(self->heap_max + 1) * 8);
    self->set = PyMem_RawMalloc((size_t)m * 8);
    if (self->heap == NULL || self->set == NULL) {
        PyMem_RawFree(self->heap);
        PyMem_RawFree(self->set);
        self->heap = NULL;
        PyErr_NoMemory();
        return -1;
    }
    memset(self->set, 0xFF, (size_t)m * 8);
    self->set_mask = m - 1;
    self->heap_len = 0;
    self->capacity = capacity;
    self->never = (int64_t)never;
    self->live = self->requests = self->misses = 0;
    self->t = 0;
    return 0;
}

static void Belady_dealloc(BeladyObject *self)
{
    PyMem_RawFree(self->heap);
    PyMem_RawFree(self->set);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Belady_hits(BeladyObject *self, PyObject *args)
{
    PyObject *next_obj, *out_obj;
    if (self->heap == NULL)
        return NOT_READY(self);
    if (!PyArg_ParseTuple(args, "OO", &next_obj, &out_obj))
        return NULL;
    Py_buffer nx, out;
    if (get_array(next_obj, &nx, 8, 0, 0, "next_use (int64)") < 0)
        return NULL;
    Py_ssize_t n = nx.len / 8;
    if (get_array(out_obj, &out, 1, n, 1, "out (uint8 or bool, one per request)") < 0) {
        PyBuffer_Release(&nx);
        return NULL;
    }
    const int64_t *next_use = (const int64_t *)nx.buf;
    uint8_t *hit = (uint8_t *)out.buf;
    int64_t never = self->never;
    if (self->t + n > never) {
        PyBuffer_Release(&nx);
        PyBuffer_Release(&out);
        return PyErr_Format(PyExc_ValueError, "BeladyKernel fed %lld requests, more than never = %lld",
                            (long long)(self->t + n), (long long)never);
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        int64_t t = self->t++, nu = next_use[k];
        int64_t v = nu < never ? nu : never + t;
        if (set_take(self, t)) {
            hit[k] = 1;
        } else {
            hit[k] = 0;
            self->misses++;
            if (self->live == self->capacity) {
                int64_t victim = heap_pop(self->heap, &self->heap_len);
                if (victim < never)
                    set_take(self, victim);
                self->live--;
            }
            self->live++;
        }
        if (nu < never)
            set_add(self, nu);
        if (self->heap_len >= self->heap_max)
            heap_rebuild(self->heap, &self->heap_len, t);
        heap_push(self->heap, &self->heap_len, v);
    }
    self->requests += (uint64_t)n;
    PyBuffer_Release(&nx);
    PyBuffer_Release(&out);
    Py_RETURN_NONE;
}

static PyObject *Belady_get_buffer_bytes(BeladyObject *self, void *Py_UNUSED(c))
{
    return PyLong_FromUnsignedLongLong((uint64_t)(self->heap_max + 1) * 8 + (self->set_mask + 1) * 8);
}

#define BELADY_U64(FN, FIELD) \
    static PyObject *FN(BeladyObject *self, void *Py_UNUSED(c)) { return PyLong_FromUnsignedLongLong(self->FIELD); }
BELADY_U64(Belady_get_capacity, capacity)
BELADY_U64(Belady_get_size, live)
BELADY_U64(Belady_get_requests, requests)
BELADY_U64(Belady_get_misses, misses)

static PyObject *Belady_get_never(BeladyObject *self, void *Py_UNUSED(c))
{
    return PyLong_FromLongLong(self->never);
}

static PyMethodDef Belady_methods[] = {
    {"hits", (PyCFunction)Belady_hits, METH_VARARGS,
     "hits(next_use, out): the next requests' next-use times (int64, in trace order) in; MIN's hit (1) / "
     "miss (0) per request into out."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Belady_getset[] = {
    {"capacity", (getter)Belady_get_capacity, NULL, "Entries the cache holds at most.", NULL},
    {"never", (getter)Belady_get_never, NULL, "The trace's length: next-use times from here mean never.", NULL},
    {"size", (getter)Belady_get_size, NULL, "Entries held.", NULL},
    {"requests", (getter)Belady_get_requests, NULL, "Requests fed.", NULL},
    {"misses", (getter)Belady_get_misses, NULL, "Misses so far.", NULL},
    {"buffer_bytes", (getter)Belady_get_buffer_bytes, NULL, "Bytes of the heap and the set.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject BeladyType = KERNEL_TYPE("BeladyKernel", BeladyObject, Belady,
                                      "MIN fed next-use times chunk by chunk, memory O(capacity) (belady.c).");
