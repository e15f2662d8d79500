/*
 * The DUE's submit pass: due_submit(cache, fps, urls, buf, n, buf_urls,
 * window, pos), and due_accept, its core, which DueFront (due_front.c) runs
 * on the state it keeps.
 *
 * due_submit: the hot path of crawler.due.disk.DiskDUE.submit in one call (the
 * pure-Python twin is crawler/due/submit_pass.py; tests check both give the
 * same cache state, buffer and journal bytes).  Per call (a page's links):
 *
 *   1. probe the front cache with every fingerprint (hits are duplicates);
 *   2. append the misses to the buffer: fingerprints into `buf` at `n`, URL
 *      objects onto the list `buf_urls` (references, no copies);
 *   3. write the misses' journal record into the mapped window at `pos`:
 *        u32 tag | u32 count | u32 blob_bytes | u32 crc32 | count x u64 | blob
 *      with the URLs' UTF-8 joined by "\n" (crawler/due/journal.py).
 *
 * Returns (misses, record_bytes).  record_bytes is -1 when the record was not
 * written: it does not fit in the window, a URL holds a newline, or a URL is
 * not valid UTF-8 (lone surrogates); the caller then writes it with the
 * journal's own code, which handles those cases.
 */
#include "native.h"

#define DUE_TAG_LINES 0x4C4A5544u   /* b"DUJL", same as journal.TAG_LINES */
#define DUE_HEADER_BYTES 16
#define DUE_STACK_URLS 512          /* calls up to this size need no heap scratch */
#define DUE_PREFETCH_BYTES 1024     /* of the window past a record: about one page's record */

static inline void put_u32le(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

/* hits[i] = the cache's answer for fps[i]: the compiled policies' loops
 * directly, any other cache through its check_and_add_many. */
static int due_probe(PyObject *cache, PyObject *fps_obj, const uint64_t *fps, Py_ssize_t count, uint8_t *hits)
{
    if (clock_sets_probe(cache, fps, hits, count) || clock_probe(cache, fps, hits, count) ||
        lru_probe(cache, fps, hits, count) ||
        random_probe(cache, fps, hits, count))
        return 0;
    PyObject *r = PyObject_CallMethod(cache, "check_and_add_many", "O", fps_obj);
    if (r == NULL)
        return -1;
    Py_buffer view;
    if (PyObject_GetBuffer(r, &view, PyBUF_C_CONTIGUOUS) < 0) {
        Py_DECREF(r);
        return -1;
    }
    int ok = view.len == count && view.itemsize == 1;
    if (ok)
        for (Py_ssize_t i = 0; i < count; i++)
            hits[i] = ((const uint8_t *)view.buf)[i] != 0;
    PyBuffer_Release(&view);
    Py_DECREF(r);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "check_and_add_many must return one bool per fingerprint");
        return -1;
    }
    return 0;
}

/* The journal record of the misses at window[pos...]; returns its size, or -1
 * if it cannot be written here (see above). `ptrs`/`lens` are scratch. */
static Py_ssize_t due_record(PyObject *buf_urls, Py_ssize_t first, const uint64_t *fps, Py_ssize_t m,
                             uint8_t *window, Py_ssize_t window_len, Py_ssize_t pos,
                             const char **ptrs, Py_ssize_t *lens)
{
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
    return -1;                        /* the file is little-endian: let Python convert */
#endif
    Py_ssize_t blob = m - 1;
    for (Py_ssize_t i = 0; i < m; i++) {
        PyObject *u = PyList_GET_ITEM(buf_urls, first + i);
        if (!PyUnicode_Check(u))
            return -1;
        const char *s = PyUnicode_AsUTF8AndSize(u, &lens[i]);
        if (s == NULL) {              /* lone surrogates: the journal's own code encodes them */
            PyErr_Clear();
            return -1;
        }
        if (memchr(s, '\n', (size_t)lens[i]) != NULL)
            return -1;
        ptrs[i] = s;
        blob += lens[i];
    }
    Py_ssize_t size = DUE_HEADER_BYTES + 8 * m + blob;
    if (window == NULL || pos < 0 || m > UINT32_MAX || blob > UINT32_MAX || pos + size > window_len)
        return -1;
    uint8_t *head = window + pos, *q = head + DUE_HEADER_BYTES;
    memcpy(q, fps, (size_t)(8 * m));
    uint32_t crc = crc32_update(0, q, (size_t)(8 * m));
    uint8_t *start = q += 8 * m;
    for (Py_ssize_t i = 0; i < m; i++) {
        if (i)
            *q++ = '\n';
        memcpy(q, ptrs[i], (size_t)lens[i]);
        q += lens[i];
    }
    crc = crc32_update(crc, start, (size_t)blob);
    put_u32le(head, DUE_TAG_LINES);
    put_u32le(head + 4, (uint32_t)m);
    put_u32le(head + 8, (uint32_t)blob);
    put_u32le(head + 12, crc);
    /* The next call's record starts where this one ends: ask for those lines
     * now, so its stores find them in cache.  (The window's pages are fresh:
     * otherwise each line's first store waits for memory.) */
    const uint8_t *next = head + size, *end = window + window_len;
    for (Py_ssize_t k = 0; k < DUE_PREFETCH_BYTES && next + k < end; k += 64)
        __builtin_prefetch(next + k, 1, 2);
    return size;
}

/* Steps 1-3 for one batch: probe `count` fingerprints `src` (the array
 * object fps_obj, for caches the kernel does not know), append the misses'
 * fingerprints to dst[0..m) and their URL objects to the list buf_urls, and
 * write their record into window_obj at pos if it fits (*size = its bytes,
 * else -1).  Returns m, or -1 with an exception set (buf_urls as it was). */
Py_ssize_t due_accept(PyObject *cache, PyObject *fps_obj, const uint64_t *src, Py_ssize_t count,
                      PyObject *urls, uint64_t *dst, PyObject *buf_urls, PyObject *window_obj,
                      Py_ssize_t pos, Py_ssize_t *size)
{
    uint8_t hits_stack[DUE_STACK_URLS];
    const char *ptrs_stack[DUE_STACK_URLS];
    Py_ssize_t lens_stack[DUE_STACK_URLS];
    uint8_t *hits = hits_stack;
    const char **ptrs = ptrs_stack;
    Py_ssize_t *lens = lens_stack;
    Py_ssize_t m = -1, first = PyList_GET_SIZE(buf_urls);
    *size = 0;
    if (count > DUE_STACK_URLS) {
        hits = PyMem_Malloc((size_t)count);
        ptrs = PyMem_Malloc((size_t)count * sizeof(*ptrs));
        lens = PyMem_Malloc((size_t)count * sizeof(*lens));
        if (hits == NULL || ptrs == NULL || lens == NULL) {
            PyErr_NoMemory();
            goto done;
        }
    }
    if (due_probe(cache, fps_obj, src, count, hits) < 0)
        goto done;
    Py_ssize_t k = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (hits[i])
            continue;
        dst[k++] = src[i];
        if (PyList_Append(buf_urls, PyList_GET_ITEM(urls, i)) < 0) {
            PyList_SetSlice(buf_urls, first, PY_SSIZE_T_MAX, NULL);
            goto done;
        }
    }
    if (k) {
        Py_buffer win;
        uint8_t *window = NULL;
        Py_ssize_t window_len = 0;
        int have_win = 0;
        if (window_obj != Py_None) {
            if (PyObject_GetBuffer(window_obj, &win, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
                PyList_SetSlice(buf_urls, first, PY_SSIZE_T_MAX, NULL);
                goto done;
            }
            have_win = 1;
            window = (uint8_t *)win.buf;
            window_len = win.len;
        }
        *size = due_record(buf_urls, first, dst, k, window, window_len, pos, ptrs, lens);
        if (have_win)
            PyBuffer_Release(&win);
    }
    m = k;
done:
    if (hits != hits_stack)
        PyMem_Free(hits);
    if (ptrs != ptrs_stack)
        PyMem_Free((void *)ptrs);
    if (lens != lens_stack)
        PyMem_Free(lens);
    return m;
}

PyObject *due_submit(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError,
                        "due_submit(cache, fps, urls, buf, n, buf_urls, window, pos) takes 8 arguments");
        return NULL;
    }
    PyObject *cache = args[0], *fps_obj = args[1], *urls = args[2], *buf_obj = args[3];
    PyObject *buf_urls = args[5], *window_obj = args[6];
    Py_ssize_t n = PyLong_AsSsize_t(args[4]), pos = PyLong_AsSsize_t(args[7]);
    if ((n == -1 || pos == -1) && PyErr_Occurred())
        return NULL;
    if (!PyList_CheckExact(urls) || !PyList_CheckExact(buf_urls)) {
        PyErr_SetString(PyExc_TypeError, "due_submit needs lists of URLs");
        return NULL;
    }
    Py_buffer in, buf;
    PyObject *owner;
    if (get_u64_view(fps_obj, &in, &owner) < 0)
        return NULL;
    PyObject *result = NULL;
    int have_buf = 0;
    Py_ssize_t count = in.len / 8;
    if (PyList_GET_SIZE(urls) != count) {
        PyErr_SetString(PyExc_ValueError, "due_submit got a different number of fingerprints and URLs");
        goto done;
    }
    if (PyObject_GetBuffer(buf_obj, &buf, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        goto done;
    have_buf = 1;
    if (buf.itemsize != 8 || n < 0 || n + count > buf.len / 8) {
        PyErr_SetString(PyExc_ValueError, "due_submit: the buffer has no room for this batch");
        goto done;
    }
    Py_ssize_t size;
    Py_ssize_t m = due_accept(cache, fps_obj, (const uint64_t *)in.buf, count, urls, (uint64_t *)buf.buf + n,
                              buf_urls, window_obj, pos, &size);
    if (m < 0)
        goto done;
    result = Py_BuildValue("(nn)", m, size);
    if (result == NULL)
        PyList_SetSlice(buf_urls, PyList_GET_SIZE(buf_urls) - m, PY_SSIZE_T_MAX, NULL);
done:
    if (have_buf)
        PyBuffer_Release(&buf);
    PyBuffer_Release(&in);
    Py_XDECREF(owner);
    return result;
}

