/*
 * belady(next_use, capacity, out): MIN's hit sequence for a whole trace,
 * offline (Belady's clairvoyant policy, the `min` cache policy and the
 * replay's lower bound; crawler/cache/min.py has the pure-Python twin).
 */
#include "native.h"

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


