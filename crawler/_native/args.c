/*
 * Arguments in and results out, shared by every function of the module:
 * one fingerprint from a Python int, a C-contiguous uint64 view of any
 * array-like, a fresh numpy bool array, a list of bytes paths, and a
 * contiguous buffer of fixed-size items.  numpy's callables are looked up
 * once at module init (args_init), not per call.
 */
#include "native.h"

/* Cached numpy callables (set once at module init). */
static PyObject *np_empty = NULL;
static PyObject *np_ascontiguousarray = NULL;
static PyObject *np_uint64 = NULL;
static PyObject *np_bool = NULL;
static PyObject *np_ndarray = NULL;       /* numpy.ndarray */
static PyObject *np_u64_dtype = NULL;     /* numpy.dtype(numpy.uint64): numpy keeps one, shared */
static PyObject *str_dtype = NULL;

int args_init(void)
{
    PyObject *numpy = PyImport_ImportModule("numpy");
    if (numpy == NULL)
        return -1;
    np_empty = PyObject_GetAttrString(numpy, "empty");
    np_ascontiguousarray = PyObject_GetAttrString(numpy, "ascontiguousarray");
    np_uint64 = PyObject_GetAttrString(numpy, "uint64");
    np_bool = PyObject_GetAttrString(numpy, "bool_");
    np_ndarray = PyObject_GetAttrString(numpy, "ndarray");
    PyObject *dtype = PyObject_GetAttrString(numpy, "dtype");
    np_u64_dtype = dtype && np_uint64 ? PyObject_CallOneArg(dtype, np_uint64) : NULL;
    Py_XDECREF(dtype);
    Py_DECREF(numpy);
    str_dtype = PyUnicode_InternFromString("dtype");
    if (!np_empty || !np_ascontiguousarray || !np_uint64 || !np_bool || !np_ndarray || !np_u64_dtype || !str_dtype)
        return -1;
    return 0;
}

/* One fingerprint from a Python int (or anything with __index__). */
int fp_from_object(PyObject *obj, uint64_t *fp)
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
int get_u64_view(PyObject *obj, Py_buffer *view, PyObject **owner)
{
    *owner = NULL;
    /* A numpy array of numpy's own native uint64 dtype: checked by the dtype
     * object, because numpy builds the buffer's format string anew for every
     * view, and that cost more than the rest of a small batch's argument
     * handling (the DUE's hot path gets a fresh slice per page). */
    if (Py_TYPE(obj) == (PyTypeObject *)np_ndarray) {
        PyObject *dt = PyObject_GetAttr(obj, str_dtype);
        int same = dt == np_u64_dtype;
        Py_XDECREF(dt);
        if (same && PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS) == 0) {
            if (view->itemsize == 8 && view->ndim == 1)
                return 0;
            PyBuffer_Release(view);
        }
        PyErr_Clear();
    }
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
PyObject *new_bool_array(Py_ssize_t n, Py_buffer *out)
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

/* Argument helpers: a list of `count` paths (bytes or None), and int64 / byte buffers. */
int get_paths(PyObject *list, Py_ssize_t count, const char **out, const char *what)
{
    if (!PyList_CheckExact(list) || PyList_GET_SIZE(list) != count) {
        PyErr_Format(PyExc_TypeError, "%s must be a list of %zd paths (bytes or None)", what, count);
        return -1;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *p = PyList_GET_ITEM(list, i);
        if (p == Py_None)
            out[i] = NULL;
        else if (PyBytes_CheckExact(p))
            out[i] = PyBytes_AS_STRING(p);
        else {
            PyErr_Format(PyExc_TypeError, "%s must hold bytes paths or None", what);
            return -1;
        }
    }
    return 0;
}

int get_array(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, Py_ssize_t min_items, int writable,
              const char *what)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    if (view->itemsize != itemsize || view->len / itemsize < min_items) {
        PyErr_Format(PyExc_ValueError, "%s must be a contiguous array of at least %zd items of %zd bytes",
                     what, min_items, itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

