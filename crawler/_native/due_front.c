/*
 * DueFront(cache, buf): the DUE's front, DiskDUE.submit's hot path and the
 * state it touches (crawler/due/front.py has the pure-Python twin PyFront).
 *
 * DiskDUE.submit's common case in one call: the state the hot path touches
 * (cache, buffer, URL list, journal window and append position, counters,
 * the thresholds at which Python must look) lives here, and DiskDUE and its
 * Journal read and set it as attributes.  crawler/due/front.py has the
 * pure-Python twin (PyFront) and the protocol:
 *
 *   submit(fps, urls)      -> []          done; nothing else to do
 *                          -> slow(fps, urls)  nothing done: `attention` is set
 *                                         (URLs to hand out, releases pending),
 *                                         or the batch needs Python (not a
 *                                         list, empty, no room in the buffer)
 *                          -> finish(r)   done, but accept's answer r is not []
 *   accept(fps, urls)      -> []          done; nothing else to do
 *                          -> (n, m)      buffered at [n, n + m) but not
 *                                         journaled: Python writes the record
 *                                         and sets n = n + m
 *                          -> m           done; Python must look (fsync due,
 *                                         fault hook, merge due or finished)
 * DiskDUE binds its own submit to the front's, so a page costs one call from
 * Python, not a Python method around this one.
 */
#include "native.h"

#include <structmember.h>
#include <time.h>

typedef struct {
    PyObject_HEAD
    PyObject *cache;
    PyObject *buf;          /* numpy uint64 array, held exported in bufv */
    Py_buffer bufv;
    int have_bufv;
    PyObject *urls;         /* list: the buffer's URLs */
    PyObject *window;       /* the journal's mapped window, or None */
    Py_ssize_t n;           /* fingerprints in buf */
    Py_ssize_t window_at;   /* the window's file offset */
    Py_ssize_t active_bytes;/* the active segment's size */
    Py_ssize_t look_at;     /* n at which Python must look at merges */
    long long checks;       /* fingerprints offered (lifetime, set at restore) */
    double fsync_at;        /* CLOCK_MONOTONIC seconds; +inf: never */
    char dirty;             /* the segment was written since its last fsync */
    char merge_done;        /* the running merge has ended */
    char hooked;            /* a fault hook is set: always hand back to Python */
    char attention;         /* Python has URLs to hand out or releases pending */
    PyObject *slow;         /* slow(fps, urls): submit when the front does nothing */
    PyObject *finish;       /* finish(r): the rest of a submit that accept answered r */
} FrontObject;

static int front_set_buf(FrontObject *self, PyObject *value, void *Py_UNUSED(closure))
{
    if (value == NULL) {
        PyErr_SetString(PyExc_AttributeError, "buf cannot be deleted");
        return -1;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(value, &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (view.itemsize != 8 || view.ndim != 1) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "DueFront.buf must be a 1-d array of uint64");
        return -1;
    }
    if (self->have_bufv)
        PyBuffer_Release(&self->bufv);
    self->bufv = view;
    self->have_bufv = 1;
    Py_INCREF(value);
    Py_XSETREF(self->buf, value);
    return 0;
}

static PyObject *front_get_buf(FrontObject *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->buf ? self->buf : Py_None);
}

static int front_set_obj(PyObject **slot, PyObject *value, int need_list)
{
    if (value == NULL || (need_list && !PyList_CheckExact(value))) {
        PyErr_SetString(PyExc_TypeError, need_list ? "must be a list" : "cannot be deleted");
        return -1;
    }
    Py_INCREF(value);
    Py_XSETREF(*slot, value);
    return 0;
}

/* The getter and setter of an object slot (a list only, for NEED_LIST). */
#define OBJECT_SLOT(FIELD, NEED_LIST)                                                 \
    static PyObject *front_get_##FIELD(FrontObject *self, void *Py_UNUSED(closure))   \
    {                                                                                 \
        return Py_NewRef(self->FIELD ? self->FIELD : Py_None);                        \
    }                                                                                 \
    static int front_set_##FIELD(FrontObject *self, PyObject *v, void *Py_UNUSED(closure)) \
    {                                                                                 \
        return front_set_obj(&self->FIELD, v, NEED_LIST);                             \
    }

OBJECT_SLOT(urls, 1)
OBJECT_SLOT(cache, 0)
OBJECT_SLOT(window, 0)
OBJECT_SLOT(slow, 0)
OBJECT_SLOT(finish, 0)

static int front_init(FrontObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"cache", "buf", NULL};
    PyObject *cache, *buf;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO:DueFront", kwlist, &cache, &buf))
        return -1;
    if (front_set_buf(self, buf, NULL) < 0)
        return -1;
    Py_INCREF(cache);
    Py_XSETREF(self->cache, cache);
    Py_XSETREF(self->urls, PyList_New(0));
    if (self->urls == NULL)
        return -1;
    Py_XSETREF(self->window, Py_NewRef(Py_None));
    Py_XSETREF(self->slow, Py_NewRef(Py_None));
    Py_XSETREF(self->finish, Py_NewRef(Py_None));
    self->n = self->window_at = self->active_bytes = 0;
    self->look_at = PY_SSIZE_T_MAX;
    self->checks = 0;
    self->fsync_at = Py_HUGE_VAL;
    self->dirty = self->merge_done = self->hooked = self->attention = 0;
    return 0;
}

/* The front takes part in garbage collection: its slow and finish are the DUE's
 * bound methods, and the DUE holds the front, so the two form a cycle. */
static int front_traverse(FrontObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->buf);
    Py_VISIT(self->cache);
    Py_VISIT(self->urls);
    Py_VISIT(self->window);
    Py_VISIT(self->slow);
    Py_VISIT(self->finish);
    return 0;
}

static int front_clear(FrontObject *self)
{
    if (self->have_bufv) {
        PyBuffer_Release(&self->bufv);
        self->have_bufv = 0;
    }
    Py_CLEAR(self->buf);
    Py_CLEAR(self->cache);
    Py_CLEAR(self->urls);
    Py_CLEAR(self->window);
    Py_CLEAR(self->slow);
    Py_CLEAR(self->finish);
    return 0;
}

static void front_dealloc(FrontObject *self)
{
    PyObject_GC_UnTrack(self);
    front_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static double monotonic_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);   /* time.monotonic's clock on Linux */
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static PyObject *front_core(FrontObject *self, PyObject *fps_obj, PyObject *urls, int quick)
{
    if (!self->have_bufv || self->cache == NULL || self->urls == NULL || self->window == NULL)
        return NOT_READY(self);
    if (!PyList_CheckExact(urls)) {
        if (quick)
            Py_RETURN_NONE;
        PyErr_SetString(PyExc_TypeError, "DueFront.accept needs a list of URLs");
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(urls);
    if (count == 0 && quick)
        Py_RETURN_NONE;
    Py_buffer in;
    PyObject *owner;
    if (get_u64_view(fps_obj, &in, &owner) < 0)
        return NULL;
    PyObject *result = NULL;
    const Py_ssize_t n = self->n;
    if (in.len / 8 != count) {
        PyErr_SetString(PyExc_ValueError, "submit got a different number of fingerprints and URLs");
        goto done;
    }
    if (n < 0 || n + count > self->bufv.len / 8) {
        if (quick)
            result = Py_NewRef(Py_None);
        else
            PyErr_SetString(PyExc_ValueError, "DueFront.accept: the buffer has no room for this batch");
        goto done;
    }
    Py_ssize_t size;
    Py_ssize_t m = due_accept(self->cache, fps_obj, (const uint64_t *)in.buf, count, urls,
                              (uint64_t *)self->bufv.buf + n, self->urls, self->window,
                              self->active_bytes - self->window_at, &size);
    if (m < 0)
        goto done;
    self->checks += count;
    if (m && size < 0) {
        result = Py_BuildValue("(nn)", n, m);
        goto done;
    }
    if (m) {
        self->n = n + m;
        self->active_bytes += size;
        self->dirty = 1;
    }
    if ((m && (self->hooked || (self->fsync_at < Py_HUGE_VAL && monotonic_s() >= self->fsync_at)))
        || self->n >= self->look_at || self->merge_done)
        result = PyLong_FromSsize_t(m);
    else
        result = PyList_New(0);
done:
    PyBuffer_Release(&in);
    Py_XDECREF(owner);
    return result;
}

static PyObject *front_submit(FrontObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "DueFront.submit(fps, urls) takes 2 arguments");
        return NULL;
    }
    PyObject *r;
    if (self->attention)
        r = Py_NewRef(Py_None);
    else if ((r = front_core(self, args[0], args[1], 1)) == NULL || PyList_CheckExact(r))
        return r;
    /* Python's turn: the front did nothing (None), or accept's answer needs it. */
    PyObject *callee = r == Py_None ? self->slow : self->finish;
    if (callee == NULL) {
        Py_DECREF(r);
        return NOT_READY(self);
    }
    Py_INCREF(callee);                      /* the call may replace the slot */
    PyObject *out = r == Py_None ? PyObject_Vectorcall(callee, args, 2, NULL)
                                 : PyObject_CallOneArg(callee, r);
    Py_DECREF(callee);
    Py_DECREF(r);
    return out;
}

static PyObject *front_accept(FrontObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "DueFront.accept(fps, urls) takes 2 arguments");
        return NULL;
    }
    return front_core(self, args[0], args[1], 0);
}

static PyMethodDef front_methods[] = {
    {"submit", (PyCFunction)(void (*)(void))front_submit, METH_FASTCALL,
     "submit(fps, urls): the hot path; hands the batch to slow() or accept's answer to finish()."},
    {"accept", (PyCFunction)(void (*)(void))front_accept, METH_FASTCALL,
     "accept(fps, urls): probe, buffer and journal a batch: [], (n, m) or m."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef front_members[] = {
    {"n", T_PYSSIZET, offsetof(FrontObject, n), 0, "fingerprints in buf"},
    {"window_at", T_PYSSIZET, offsetof(FrontObject, window_at), 0, "the window's file offset"},
    {"active_bytes", T_PYSSIZET, offsetof(FrontObject, active_bytes), 0, "the active segment's size"},
    {"look_at", T_PYSSIZET, offsetof(FrontObject, look_at), 0, "n at which Python must look at merges"},
    {"checks", T_LONGLONG, offsetof(FrontObject, checks), 0, "fingerprints offered"},
    {"fsync_at", T_DOUBLE, offsetof(FrontObject, fsync_at), 0, "when the journal fsync is due (monotonic s)"},
    {"dirty", T_BOOL, offsetof(FrontObject, dirty), 0, "written since the last fsync"},
    {"merge_done", T_BOOL, offsetof(FrontObject, merge_done), 0, "the running merge has ended"},
    {"hooked", T_BOOL, offsetof(FrontObject, hooked), 0, "a fault hook is set"},
    {"attention", T_BOOL, offsetof(FrontObject, attention), 0, "URLs to hand out or releases pending"},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef front_getset[] = {
    {"buf", (getter)front_get_buf, (setter)front_set_buf, "the buffer's fingerprints (uint64 array)", NULL},
    {"urls", (getter)front_get_urls, (setter)front_set_urls, "the buffer's URLs (list)", NULL},
    {"cache", (getter)front_get_cache, (setter)front_set_cache, "the front cache", NULL},
    {"window", (getter)front_get_window, (setter)front_set_window, "the journal's mapped window", NULL},
    {"slow", (getter)front_get_slow, (setter)front_set_slow, "slow(fps, urls): submit's Python path", NULL},
    {"finish", (getter)front_get_finish, (setter)front_set_finish, "finish(r): the rest after accept", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject FrontType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "crawler._native._compiled.DueFront",
    .tp_basicsize = sizeof(FrontObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "DiskDUE.submit's hot path and the state it touches (crawler/due/front.py).",
    .tp_traverse = (traverseproc)front_traverse,
    .tp_clear = (inquiry)front_clear,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)front_init,
    .tp_dealloc = (destructor)front_dealloc,
    .tp_methods = front_methods,
    .tp_members = front_members,
    .tp_getset = front_getset,
};

