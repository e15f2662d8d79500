/*
 * The module crawler._native._compiled: its functions, its types and its
 * init.  The code lives in one source per concern (native.h lists them);
 * _compiled.pyi describes this module's API for editors and type checkers.
 *
 * Types (10):
 *   ClockKernel(capacity)          the paper's CLOCK: one ring, a position index
 *   ClockSetsKernel(capacity, ways) set-associative CLOCK (a CLOCK ring per set)
 *   LruKernel(capacity)            exact LRU: entries with list links + index
 *   RandomKernel(capacity, seed)   random victim from splitmix64
 *   SetKernel(capacity, insert)    hash set (infinite: inserts; static: frozen)
 *   SieveKernel(capacity)          SIEVE: a FIFO queue, visited bits, a hand
 *   LruStackKernel(capacity, window) LRU stack distances up to capacity, chunk by chunk
 *   DueFront(cache, buf)           the DUE's submit hot path and its state
 *   BeladyKernel(capacity, never)  MIN fed next-use times chunk by chunk
 *   NextUseKernel(never)           next-use times, a bucket of a trace fed backwards
 * Functions (11):
 *   belady             MIN's hit sequence, offline
 *   crc32              zlib's CRC-32, as the DUE journal computes it
 *   due_submit         the DUE's submit pass (probe, buffer, journal record)
 *   due_sort_unique, due_find_new, due_write_buckets, due_pick
 *                      the DUE's merge passes
 *   due_fsync_files, due_remove_files, due_populate_write
 *                      the DUE's file-system calls
 *   split_owners       the host splitter's per-page owner pass
 */
#include "native.h"

static PyMethodDef module_methods[] = {
    {"belady", belady, METH_VARARGS,
     "belady(next_use, capacity, out): MIN's hit (1) / miss (0) per request into out."},
    {"due_submit", (PyCFunction)(void (*)(void))due_submit, METH_FASTCALL,
     "due_submit(cache, fps, urls, buf, n, buf_urls, window, pos) -> (misses, record_bytes): "
     "the DUE's submit hot path (see crawler/due/submit_pass.py)."},
    {"crc32", crc32_py, METH_VARARGS, "crc32(data, crc=0): zlib's CRC-32, as the DUE's submit pass computes it."},
    {"due_sort_unique", due_sort_unique, METH_VARARGS,
     "due_sort_unique(fps, keys, first) -> count: sorted distinct fingerprints and each one's earliest index "
     "(GIL released; see crawler/due/merge_pass.py)."},
    {"due_find_new", due_find_new, METH_VARARGS,
     "due_find_new(keys, bounds, base_paths, base_counts, delta_paths, delta_counts, window_entries, new_mask, "
     "new_counts) -> None | (path, size, expected): which sorted keys are in no bucket file (GIL released)."},
    {"due_write_buckets", due_write_buckets, METH_VARARGS,
     "due_write_buckets(keys, new_mask, bounds, base_paths, base_counts, delta_paths, delta_counts, buckets, "
     "out_paths, folds, window_entries) -> None | (path, size, expected): new delta or base files (GIL released)."},
    {"due_fsync_files", due_fsync_files, METH_VARARGS,
     "due_fsync_files(paths, threads): fsync the files from parallel threads (GIL released)."},
    {"due_remove_files", due_remove_files, METH_VARARGS,
     "due_remove_files(paths): unlink the files, skipping missing ones (GIL released)."},
    {"due_pick", due_pick, METH_VARARGS, "due_pick(urls, positions) -> [urls[p] for p in positions]."},
    {"due_populate_write", due_populate_write, METH_O,
     "due_populate_write(mapping) -> bool: fault a shared mapping's pages in writable now (GIL released)."},
    {"split_owners", (PyCFunction)(void (*)(void))split_owners, METH_FASTCALL,
     "split_owners(urls, memo, resolve, me, start, counts) -> (owners, cross, keep, keep_urls): "
     "the host splitter's per-page pass (see crawler/splitter/owner_pass.py)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef compiled_module = {
    PyModuleDef_HEAD_INIT, "crawler._native._compiled",
    "The crawler's compiled kernels: URL caches, Belady's MIN, the DUE's passes, the splitter's owner pass "
    "(crawler/_native/native.h lists the sources).",
    -1, module_methods, NULL, NULL, NULL, NULL};

static int add_type(PyObject *m, PyTypeObject *t, const char *name)
{
    if (PyType_Ready(t) < 0)
        return -1;
    Py_INCREF(t);
    if (PyModule_AddObject(m, name, (PyObject *)t) < 0) {
        Py_DECREF(t);
        return -1;
    }
    return 0;
}

PyMODINIT_FUNC PyInit__compiled(void)
{
    clock_sets_detect_cpu();
    crc32_init();
    if (args_init() < 0)
        return NULL;
    PyObject *m = PyModule_Create(&compiled_module);
    if (m == NULL)
        return NULL;
    if (add_type(m, &ClockType, "ClockKernel") < 0 || add_type(m, &ClockSetsType, "ClockSetsKernel") < 0 ||
        add_type(m, &LruType, "LruKernel") < 0 ||
        add_type(m, &RandomType, "RandomKernel") < 0 || add_type(m, &SetType, "SetKernel") < 0 ||
        add_type(m, &SieveType, "SieveKernel") < 0 || add_type(m, &LruStackType, "LruStackKernel") < 0 ||
        add_type(m, &FrontType, "DueFront") < 0 || add_type(m, &BeladyType, "BeladyKernel") < 0 ||
        add_type(m, &NextUseType, "NextUseKernel") < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
