/* The CPU kernel of xsyn.trees.tensors: per-sentence structure of a padded batch.
 *
 * Torch ops compute the tree tensors for the whole padded (B, N, N) block with a handful of large
 * operations; on a CPU most of that block is padding and each operation's dispatch dominates.
 * Here each sentence is walked over its own nodes only.
 *
 * tree_core: ancestors, depth and distances (int16 and float), in breadth-first order so that a
 * node's parent is done before the node:
 *   ancestors(i) = ancestors(parent(i)) + {i}
 *   D(i, j)      = D(parent(i), j) + 1 - 2 [i is an ancestor-or-self of j]
 *   D(root, j)   = depth(j) + 2 - 2 [root is an ancestor-or-self of j]  (roots hang from one virtual node)
 * which is O(L^2) per sentence of L nodes, and right for any tree (non-projective included).
 *
 * word_structure: each piece's word ordinal and the first pieces of its word and of the words
 * before and after it (what SLA and WLA need), as `_word_structure` computes them with torch ops.
 *
 * The Python side (xsyn.trees.tensors) hands in contiguous int64 inputs and freshly allocated
 * contiguous outputs of the documented shapes, as raw addresses; the GIL is released while the
 * loops run. Masks are not computed here: they stay torch ops, one definition for every device.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#define ROOT (-1)
#define PAD (-2)
#define UNREACHABLE INT16_MAX

/* Returns -1 on success, else the index of the first node whose parent is out of range, points
 * to padding, or lies on a cycle. */
static Py_ssize_t one_tree(const int64_t *parent, Py_ssize_t n, Py_ssize_t t, int32_t *scratch,
                           uint8_t *above, uint8_t *below, int16_t *dist, uint8_t *anc_out, int16_t *dist_out,
                           float *float_out, int64_t *depth_out) {
    int32_t *order = scratch, *first_child = scratch + n, *next_sibling = scratch + 2 * n;
    int32_t *depth = scratch + 3 * n;
    int16_t *lifted = (int16_t *)(scratch + 4 * n);
    uint8_t *padding = (uint8_t *)(scratch + 5 * n);
    Py_ssize_t real = 0, done = 0, span = 0;  /* real nodes all lie below `span` */
    for (Py_ssize_t i = 0; i < n; i++) first_child[i] = -1, depth[i] = 0;
    for (Py_ssize_t i = n - 1; i >= 0; i--) {  /* children lists, in index order */
        int64_t p = parent[i];
        if (p == PAD) continue;
        if (p < ROOT || p >= n || (p >= 0 && parent[p] == PAD)) return i;
        if (!real++) span = i + 1;
        if (p == ROOT) {
            order[done++] = (int32_t)i;
            depth[i] = 0;
        } else {
            next_sibling[i] = first_child[p];
            first_child[p] = (int32_t)i;
        }
    }
    /* roots were collected last to first; breadth-first order from them */
    for (Py_ssize_t a = 0, b = done - 1; a < b; a++, b--) {
        int32_t s = order[a]; order[a] = order[b]; order[b] = s;
    }
    for (Py_ssize_t head = 0; head < done; head++) {
        int32_t i = order[head];
        for (int32_t c = first_child[i]; c >= 0; c = next_sibling[c]) {
            depth[c] = depth[i] + 1;
            order[done++] = c;
        }
    }
    if (done < real) {  /* a node never reached from a root lies on (or under) a cycle */
        for (Py_ssize_t i = 0; i < n; i++) depth[i] = -1;
        for (Py_ssize_t k = 0; k < done; k++) depth[order[k]] = 0;
        for (Py_ssize_t i = 0; i < n; i++)
            if (parent[i] != PAD && depth[i] < 0) return i;
    }
    /* below[i][j] = [i is an ancestor-or-self of j]: a node's own column, then its children's, in
     * reverse breadth-first order so that every child is complete before its parent */
    for (Py_ssize_t k = 0; k < done; k++) memset(below + order[k] * n, 0, (size_t)span);
    for (Py_ssize_t k = done - 1; k >= 0; k--) {
        Py_ssize_t i = order[k];
        uint8_t *row = below + i * n;
        row[i] = 1;
        for (int32_t c = first_child[i]; c >= 0; c = next_sibling[c]) {
            const uint8_t *child = below + (Py_ssize_t)c * n;
            for (Py_ssize_t j = 0; j < span; j++) row[j] |= child[j];
        }
    }
    for (Py_ssize_t k = 0; k < done; k++) {  /* above[i][j] = [j is an ancestor-or-self of i] */
        Py_ssize_t i = order[k];
        uint8_t *row = above + i * n;
        if (parent[i] == ROOT) memset(row, 0, (size_t)span);
        else memcpy(row, above + parent[i] * n, (size_t)span);
        row[i] = 1;
    }
    for (Py_ssize_t j = 0; j < span; j++) lifted[j] = (int16_t)(depth[j] + 2);  /* the virtual node's row */
    for (Py_ssize_t k = 0; k < done; k++) {
        Py_ssize_t i = order[k];
        int64_t p = parent[i];
        const int16_t *base = p == ROOT ? lifted : dist + p * n;
        const uint8_t *sub = below + i * n;
        int16_t *row = dist + i * n;
        int16_t step = p == ROOT ? 0 : 1;
        for (Py_ssize_t j = 0; j < span; j++) row[j] = (int16_t)(base[j] + step - 2 * sub[j]);
    }
    Py_ssize_t seen = span < t ? span : t;  /* columns past `seen` are padding */
    for (Py_ssize_t j = 0; j < seen; j++) padding[j] = parent[j] == PAD;
    for (Py_ssize_t i = 0; i < t; i++) {
        uint8_t *restrict a = anc_out + i * t;
        int16_t *restrict d = dist_out + i * t;
        float *restrict f = float_out + i * t;
        Py_ssize_t from = 0;
        if (i < seen && !padding[i]) {
            const uint8_t *restrict up = above + i * n;
            const int16_t *restrict row = dist + i * n;
            for (Py_ssize_t j = 0; j < seen; j++) {
                a[j] = padding[j] ? 0 : up[j];
                d[j] = padding[j] ? UNREACHABLE : row[j];
                f[j] = padding[j] ? INFINITY : (float)row[j];
            }
            depth_out[i] = depth[i];
            from = seen;
        } else {
            depth_out[i] = 0;
        }
        memset(a + from, 0, (size_t)(t - from));
        for (Py_ssize_t j = from; j < t; j++) d[j] = UNREACHABLE, f[j] = INFINITY;
        if (from == 0) a[i] = 1;  /* a padded node is its own ancestor-or-self, as in the torch ops */
    }
    return -1;
}

static PyObject *tree_core(PyObject *Py_UNUSED(module), PyObject *args) {
    unsigned long long parent_at, anc_at, dist_at, float_at, depth_at;
    Py_ssize_t b, n, t;
    if (!PyArg_ParseTuple(args, "KnnnKKKK", &parent_at, &b, &n, &t, &anc_at, &dist_at, &float_at, &depth_at))
        return NULL;
    if (b < 0 || t < 0 || n < t || n >= 16000) {  /* distances (< 2 n) are kept in int16 */
        PyErr_SetString(PyExc_ValueError, "tree_core: bad shape");
        return NULL;
    }
    size_t nn = (size_t)n * (size_t)n;
    int32_t *scratch = malloc(sizeof(int32_t) * 6 * (size_t)(n ? n : 1));
    uint8_t *above = malloc(nn ? nn : 1), *below = malloc(nn ? nn : 1);
    int16_t *dist = malloc(sizeof(int16_t) * (nn ? nn : 1));
    if (!scratch || !above || !below || !dist) {
        free(scratch); free(above); free(below); free(dist);
        return PyErr_NoMemory();
    }
    Py_ssize_t bad_row = -1, bad_node = -1;
    const int64_t *parent = (const int64_t *)(uintptr_t)parent_at;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t s = 0; s < b && bad_node < 0; s++) {
        bad_node = one_tree(parent + s * n, n, t, scratch, above, below, dist,
                            (uint8_t *)(uintptr_t)anc_at + s * t * t,
                            (int16_t *)(uintptr_t)dist_at + s * t * t,
                            (float *)(uintptr_t)float_at + s * t * t,
                            (int64_t *)(uintptr_t)depth_at + s * t);
        if (bad_node >= 0) bad_row = s;
    }
    Py_END_ALLOW_THREADS
    free(scratch); free(above); free(below); free(dist);
    return Py_BuildValue("(nn)", bad_row, bad_node);
}

/* One row of xsyn.trees.masks._word_structure: `later` (the piece continues the previous piece's
 * word), `ordinal` (1-based count of words so far) and, in `neighbours` (3T), the first piece of
 * the piece's own word | of the word before | of the word after, where those are real words
 * (word index >= 0) and the piece is real too; its own word's first piece otherwise. */
static void one_row_of_words(const int64_t *word, Py_ssize_t t, int64_t *first, uint8_t *later,
                             int64_t *neighbours, int64_t *ordinal) {
    int64_t count = 0;
    for (Py_ssize_t j = 0; j < t; j++) {
        later[j] = j > 0 && word[j] >= 0 && word[j] == word[j - 1];
        if (!later[j]) first[++count] = j;
        ordinal[j] = count;
    }
    first[0] = first[count + 1] = 0;  /* no word before the first or after the last: `[CLS]`, not real */
    for (Py_ssize_t j = 0; j < t; j++) {
        int64_t own = first[ordinal[j]], before = first[ordinal[j] - 1], after = first[ordinal[j] + 1];
        neighbours[j] = own;
        neighbours[t + j] = word[j] >= 0 && word[before] >= 0 ? before : own;
        neighbours[2 * t + j] = word[j] >= 0 && word[after] >= 0 ? after : own;
    }
}

static PyObject *word_structure(PyObject *Py_UNUSED(module), PyObject *args) {
    unsigned long long word_at, later_at, neighbours_at, ordinal_at;
    Py_ssize_t b, t;
    if (!PyArg_ParseTuple(args, "KnnKKK", &word_at, &b, &t, &later_at, &neighbours_at, &ordinal_at))
        return NULL;
    int64_t *first = malloc(sizeof(int64_t) * (size_t)(t + 2));
    if (!first) return PyErr_NoMemory();
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t s = 0; s < b; s++)
        one_row_of_words((const int64_t *)(uintptr_t)word_at + s * t, t, first,
                         (uint8_t *)(uintptr_t)later_at + s * t, (int64_t *)(uintptr_t)neighbours_at + s * 3 * t,
                         (int64_t *)(uintptr_t)ordinal_at + s * t);
    Py_END_ALLOW_THREADS
    free(first);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"word_structure", word_structure, METH_VARARGS,
     "word_structure(word_index_ptr, B, T, later_ptr, neighbours_ptr, ordinal_ptr)"},
    {"tree_core", tree_core, METH_VARARGS,
     "tree_core(parent_ptr, B, N, T, ancestors_ptr, distances_ptr, float_distances_ptr, depth_ptr)"
     " -> (bad_row, bad_node)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kernel", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__kernel(void) { return PyModule_Create(&module); }
