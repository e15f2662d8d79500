/*
 * LruStackKernel(capacity, window=0): LRU stack distances of a stream fed in
 * chunks, bounded by `capacity` (crawler/replay/streaming.py; the in-memory
 * twin is crawler/replay/stack.py's lru_depths over a whole trace).
 *
 * Why bounded: a request whose stack distance exceeds the largest cache size
 * asked for misses at every size, so only the top `capacity` entries of the
 * LRU stack matter.  Memory is then O(capacity), whatever the trace length,
 * where the whole-trace passes need O(length).
 *
 * The structure (Bennett & Kruskal's Fenwick tree, over a sliding window of
 * time stamps): every request gets the next stamp of a window of `window`
 * stamps (> capacity, default 2 x capacity).  keys[stamp] is the fingerprint
 * requested then; a mark bit is set at the stamp of each resident
 * fingerprint's latest request; a position index finds a resident
 * fingerprint's stamp.  Marks before a stamp are counted by a Fenwick tree
 * over blocks of 64 stamps (the marks of a block are one word, counted by
 * popcount): the tree is 1/64 of the window, so it stays in the CPU's caches
 * where a tree per stamp missed them on every level (3x slower at 2^25).  A request of a resident fingerprint last
 * stamped p has depth 1 + (marks after p) = resident - (marks before p + 1)
 * + 1; its mark moves to the new stamp.  A request of any other fingerprint
 * has depth "beyond capacity" (reported as 0); it becomes resident, evicting
 * first the oldest mark when `capacity` are resident (the LRU entry, at depth
 * capacity + 1 from then on).  When the window's stamps run out, the marked
 * stamps are renumbered 0..resident-1 in order (compaction: O(window), once
 * per window - capacity requests at least, so O(1) a request amortized).
 *
 * Memory: keys 8 B and a mark bit per stamp of the window, 4 B of tree per 64
 * stamps, and a uint32 position index (load <= 1/2): 24-32 B per entry of
 * capacity with the default window.
 */
#include "cache_kernel.h"

typedef struct {
    PyObject_HEAD
    uint64_t *keys;    /* fingerprint per stamp of the window */
    int32_t *tree;     /* Fenwick tree over the window's 64-stamp blocks: tree[1..blocks] */
    uint64_t *marks;   /* bit s: stamp s is a resident fingerprint's latest request */
    PosIndex index;    /* fingerprint -> its latest stamp + 1 */
    uint64_t capacity;
    uint64_t window;
    uint64_t blocks;   /* ceil(window / 64) */
    uint64_t next;     /* the next stamp */
    uint64_t oldest;   /* no mark below this stamp */
    uint64_t resident;
    uint64_t requests;
    uint64_t compactions;
} LruStackObject;

static inline void fen_add(LruStackObject *c, uint64_t stamp, int32_t delta)
{
    for (uint64_t i = (stamp >> 6) + 1; i <= c->blocks; i += i & (~i + 1))
        c->tree[i] += delta;
}

/* Marks at stamps < x. */
static inline uint64_t fen_prefix(const LruStackObject *c, uint64_t x)
{
    int64_t s = 0;
    for (uint64_t i = x >> 6; i > 0; i &= i - 1)
        s += c->tree[i];
    if (x & 63)
        s += __builtin_popcountll(c->marks[x >> 6] & ((1ULL << (x & 63)) - 1));
    return (uint64_t)s;
}

static inline int is_marked(const LruStackObject *c, uint64_t s) { return (c->marks[s >> 6] >> (s & 63)) & 1; }
static inline void set_mark(LruStackObject *c, uint64_t s) { c->marks[s >> 6] |= 1ULL << (s & 63); }
static inline void clear_mark(LruStackObject *c, uint64_t s) { c->marks[s >> 6] &= ~(1ULL << (s & 63)); }

/* Renumbers the marked stamps 0..resident-1, keeping their order, and
 * rebuilds the tree (linear Fenwick build) and the index. */
static void stack_compact(LruStackObject *c)
{
    uint64_t j = 0;
    for (uint64_t s = c->oldest; s < c->next; s++)
        if (is_marked(c, s))
            c->keys[j++] = c->keys[s];
    memset(c->marks, 0, c->blocks * 8);
    memset(c->index.slots, 0, (c->index.mask + 1) * sizeof(uint32_t));
    for (uint64_t s = 0; s < j; s++) {
        set_mark(c, s);
        c->index.slots[pos_find(&c->index, c->keys, 1, c->keys[s])] = (uint32_t)(s + 1);
    }
    c->tree[0] = 0;
    for (uint64_t b = 0; b < c->blocks; b++)
        c->tree[b + 1] = __builtin_popcountll(c->marks[b]);
    for (uint64_t i = 1; i <= c->blocks; i++) {
        uint64_t parent = i + (i & (~i + 1));
        if (parent <= c->blocks)
            c->tree[parent] += c->tree[i];
    }
    c->next = j;
    c->oldest = 0;
    c->compactions++;
}

/* Hot path: one request; its depth (1..capacity) or 0 when deeper (or new). */
static inline uint64_t stack_access(LruStackObject *c, uint64_t fp)
{
    c->requests++;
    if (c->next == c->window)
        stack_compact(c);
    uint64_t i = pos_find(&c->index, c->keys, 1, fp);
    uint32_t slot = c->index.slots[i];
    uint64_t depth = 0;
    if (slot != 0) {
        uint64_t p = slot - 1;
        if (p + 1 == c->next)          /* the most recent fingerprint again: nothing moves */
            return 1;
        depth = c->resident - fen_prefix(c, p + 1) + 1;
        fen_add(c, p, -1);
        clear_mark(c, p);
    } else {
        if (c->resident == c->capacity) {
            uint64_t q = c->oldest;    /* the LRU entry: the oldest mark */
            while (!is_marked(c, q))
                q++;
            c->oldest = q + 1;
            pos_delete(&c->index, c->keys, 1, pos_find(&c->index, c->keys, 1, c->keys[q]));
            fen_add(c, q, -1);
            clear_mark(c, q);
            i = pos_find(&c->index, c->keys, 1, fp);   /* the deletion may have moved fp's slot */
        } else {
            c->resident++;
        }
    }
    uint64_t s = c->next++;
    c->keys[s] = fp;
    set_mark(c, s);
    fen_add(c, s, 1);
    c->index.slots[i] = (uint32_t)(s + 1);
    return depth;
}

static int LruStack_init(LruStackObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"capacity", "window", NULL};
    unsigned long long capacity, window = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "K|K", kwlist, &capacity, &window))
        return -1;
    if (self->keys != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "LruStackKernel is already initialised");
        return -1;
    }
    if (capacity < 1 || capacity >= (1ULL << 30)) {
        PyErr_SetString(PyExc_ValueError, "LruStackKernel needs 1 <= capacity < 2**30");
        return -1;
    }
    if (window == 0)
        window = 2 * capacity;
    if (window <= capacity || window >= (1ULL << 31)) {
        PyErr_SetString(PyExc_ValueError, "LruStackKernel needs capacity < window < 2**31");
        return -1;
    }
    uint64_t m = pos_index_size(capacity), blocks = (window + 63) / 64;
    self->keys = alloc_zeroed((size_t)window, 8);
    self->tree = alloc_zeroed((size_t)blocks + 1, sizeof(int32_t));
    self->marks = alloc_zeroed((size_t)blocks, 8);
    self->index.slots = alloc_zeroed((size_t)m, 4);
    if (!self->keys || !self->tree || !self->marks || !self->index.slots) {
        PyMem_RawFree(self->keys);
        PyMem_RawFree(self->tree);
        PyMem_RawFree(self->marks);
        PyMem_RawFree(self->index.slots);
        self->keys = NULL;
        return -1;
    }
    self->index.mask = m - 1;
    self->capacity = capacity;
    self->window = window;
    self->blocks = blocks;
    self->next = self->oldest = self->resident = self->requests = self->compactions = 0;
    return 0;
}

static void LruStack_dealloc(LruStackObject *self)
{
    PyMem_RawFree(self->keys);
    PyMem_RawFree(self->tree);
    PyMem_RawFree(self->marks);
    PyMem_RawFree(self->index.slots);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The two ways to take a chunk: each request's depth into a uint32 array (for
 * counts per window of requests), or only a histogram of depths. */
static PyObject *stack_feed(LruStackObject *self, PyObject *args, int histogram)
{
    PyObject *fps_obj, *out_obj;
    if (self->keys == NULL)
        return NOT_READY(self);
    if (!PyArg_ParseTuple(args, "OO", &fps_obj, &out_obj))
        return NULL;
    Py_buffer in, out;
    PyObject *owner;
    if (get_u64_view(fps_obj, &in, &owner) < 0)
        return NULL;
    Py_ssize_t n = in.len / 8;
    const uint64_t *fps = (const uint64_t *)in.buf;
    int ok;
    if (histogram)
        ok = get_array(out_obj, &out, 8, (Py_ssize_t)self->capacity + 1, 1, "hist (int64, capacity + 1)") == 0;
    else
        ok = get_array(out_obj, &out, 4, n, 1, "out (uint32, one per fingerprint)") == 0;
    if (ok) {
        if (histogram) {
            int64_t *hist = (int64_t *)out.buf;
            for (Py_ssize_t k = 0; k < n; k++) {
                if (k + PREFETCH_AHEAD < n)
                    pos_prefetch(&self->index, fps[k + PREFETCH_AHEAD]);
                hist[stack_access(self, fps[k])]++;
            }
        } else {
            uint32_t *depths = (uint32_t *)out.buf;
            for (Py_ssize_t k = 0; k < n; k++) {
                if (k + PREFETCH_AHEAD < n)
                    pos_prefetch(&self->index, fps[k + PREFETCH_AHEAD]);
                depths[k] = (uint32_t)stack_access(self, fps[k]);
            }
        }
        PyBuffer_Release(&out);
    }
    PyBuffer_Release(&in);
    Py_XDECREF(owner);
    if (!ok)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *LruStack_depths(LruStackObject *self, PyObject *args) { return stack_feed(self, args, 0); }
static PyObject *LruStack_histogram(LruStackObject *self, PyObject *args) { return stack_feed(self, args, 1); }

static PyObject *LruStack_get_buffer_bytes(LruStackObject *self, void *Py_UNUSED(c))
{
    return PyLong_FromUnsignedLongLong(self->window * 8 + (self->blocks + 1) * 4 + self->blocks * 8
                                       + (self->index.mask + 1) * 4);
}

U64_GETTER(LruStack_get_capacity, LruStackObject, capacity)
U64_GETTER(LruStack_get_window, LruStackObject, window)
U64_GETTER(LruStack_get_size, LruStackObject, resident)
U64_GETTER(LruStack_get_requests, LruStackObject, requests)
U64_GETTER(LruStack_get_compactions, LruStackObject, compactions)

static PyMethodDef LruStack_methods[] = {
    {"depths", (PyCFunction)LruStack_depths, METH_VARARGS,
     "depths(fps, out): each request's LRU stack distance into out (uint32; 0 = beyond capacity or new)."},
    {"histogram", (PyCFunction)LruStack_histogram, METH_VARARGS,
     "histogram(fps, hist): hist[d] += 1 per request of depth d (int64[capacity + 1]; 0 = beyond or new)."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef LruStack_getset[] = {
    {"capacity", (getter)LruStack_get_capacity, NULL, "Deepest stack distance told apart.", NULL},
    {"window", (getter)LruStack_get_window, NULL, "Stamps between compactions.", NULL},
    {"size", (getter)LruStack_get_size, NULL, "Fingerprints held (the top of the LRU stack).", NULL},
    {"requests", (getter)LruStack_get_requests, NULL, "Requests fed.", NULL},
    {"compactions", (getter)LruStack_get_compactions, NULL, "Times the stamps were renumbered.", NULL},
    {"buffer_bytes", (getter)LruStack_get_buffer_bytes, NULL, "Bytes of the heap arrays.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject LruStackType = KERNEL_TYPE("LruStackKernel", LruStackObject, LruStack,
                                        "LRU stack distances bounded by a capacity, fed in chunks (lru_stack.c).");
