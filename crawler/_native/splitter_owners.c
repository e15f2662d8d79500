/*
 * split_owners(urls, memo, resolve, me, start, counts): the host splitter's
 * per-page owner pass (crawler/splitter/owner_pass.py has the twin and the
 * why).
 */
#include "native.h"

/* The host splitter's per-page pass: the owner of each URL from a memo keyed by its `scheme://authority`
 * prefix, `resolve(origin, url)` on a miss; counts per destination; the indexes of
 * the cross URLs; and, when there are any, the indexes and URLs of the local ones. */
PyObject *split_owners(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "split_owners(urls, memo, resolve, me, start, counts) takes 6 arguments");
        return NULL;
    }
    PyObject *urls = args[0], *memo = args[1], *resolve = args[2], *counts = args[5];
    if (!PyList_Check(urls) || !PyDict_Check(memo) || !PyList_Check(counts)) {
        PyErr_SetString(PyExc_TypeError, "split_owners: urls and counts must be lists, memo a dict");
        return NULL;
    }
    const Py_ssize_t me = PyLong_AsSsize_t(args[3]), start = PyLong_AsSsize_t(args[4]);
    if ((me == -1 || start == -1) && PyErr_Occurred())
        return NULL;
    const Py_ssize_t nodes = PyList_GET_SIZE(counts);
    if (me < 0 || me >= nodes || start < 0) {
        PyErr_SetString(PyExc_ValueError, "split_owners: me must index counts, start must be >= 0");
        return NULL;
    }
    /* resolve() is Python and could change `urls`: hold our own reference to the list's items. */
    PyObject *items = PyList_GetSlice(urls, 0, PyList_GET_SIZE(urls));
    Py_ssize_t *tally = PyMem_Calloc((size_t)nodes, sizeof(Py_ssize_t));
    const Py_ssize_t n = items ? PyList_GET_SIZE(items) : 0;
    PyObject *owners = PyList_New(n), *cross = PyList_New(0), *keep = NULL, *keep_urls = NULL, *result = NULL;
    if (items == NULL || tally == NULL || owners == NULL || cross == NULL) {
        if (tally == NULL)
            PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *url = PyList_GET_ITEM(items, i);
        if (!PyUnicode_Check(url)) {
            PyErr_SetString(PyExc_TypeError, "split_owners: URLs must be str");
            goto done;
        }
        const Py_ssize_t len = PyUnicode_GET_LENGTH(url);
        const Py_ssize_t cut = start < len ? PyUnicode_FindChar(url, '/', start, len, 1) : -1;
        if (cut == -2)
            goto done;
        PyObject *origin = cut >= 0 ? PyUnicode_Substring(url, 0, cut) : Py_NewRef(url);
        if (origin == NULL)
            goto done;
        Py_ssize_t owner;
        PyObject *known = PyDict_GetItemWithError(memo, origin);    /* borrowed */
        if (known != NULL)
            owner = PyLong_AsSsize_t(known);
        else if (PyErr_Occurred())
            owner = -1;
        else {
            PyObject *r = PyObject_CallFunctionObjArgs(resolve, origin, url, NULL);
            owner = r ? PyLong_AsSsize_t(r) : -1;
            Py_XDECREF(r);
        }
        Py_DECREF(origin);
        if (owner == -1 && PyErr_Occurred())
            goto done;
        if (owner < 0 || owner >= nodes) {
            PyErr_Format(PyExc_ValueError, "split_owners: owner %zd of a URL is not a node (0..%zd)", owner, nodes - 1);
            goto done;
        }
        PyObject *owner_o = PyLong_FromSsize_t(owner);
        if (owner_o == NULL)
            goto done;
        PyList_SET_ITEM(owners, i, owner_o);
        tally[owner]++;
        if (owner != me) {
            PyObject *index = PyLong_FromSsize_t(i);
            if (index == NULL || PyList_Append(cross, index) < 0) {
                Py_XDECREF(index);
                goto done;
            }
            Py_DECREF(index);
        }
    }
    for (Py_ssize_t d = 0; d < nodes; d++) {
        if (!tally[d])
            continue;
        PyObject *add = PyLong_FromSsize_t(tally[d]);
        PyObject *sum = add ? PyNumber_Add(PyList_GET_ITEM(counts, d), add) : NULL;
        Py_XDECREF(add);
        if (sum == NULL || PyList_SetItem(counts, d, sum) < 0)
            goto done;
    }
    const Py_ssize_t n_cross = PyList_GET_SIZE(cross);
    if (n_cross) {
        keep = PyList_New(n - n_cross);
        keep_urls = PyList_New(n - n_cross);
        if (keep == NULL || keep_urls == NULL)
            goto done;
        for (Py_ssize_t i = 0, k = 0; i < n; i++) {
            if (PyLong_AsSsize_t(PyList_GET_ITEM(owners, i)) != me)
                continue;
            PyObject *index = PyLong_FromSsize_t(i);
            if (index == NULL)
                goto done;
            PyList_SET_ITEM(keep, k, index);
            PyList_SET_ITEM(keep_urls, k, Py_NewRef(PyList_GET_ITEM(items, i)));
            k++;
        }
    } else {
        keep = Py_NewRef(Py_None);
        keep_urls = Py_NewRef(Py_None);
    }
    result = PyTuple_Pack(4, owners, cross, keep, keep_urls);
done:
    PyMem_Free(tally);
    Py_XDECREF(items);
    Py_XDECREF(owners);
    Py_XDECREF(cross);
    Py_XDECREF(keep);
    Py_XDECREF(keep_urls);
    return result;
}
