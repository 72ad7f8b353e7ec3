/* The buffers of the Python objects a C function of the package is given: taken one after another, released
   together (on an error too); and the arguments of a pass over an Arrow string array's buffers. Included by
   ckernel.c and readers/cparse.c. */
#ifndef NDCG_MLFLOW_CBUFFERS_H
#define NDCG_MLFLOW_CBUFFERS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define MAX_VIEWS 8

typedef struct {
    Py_buffer v[MAX_VIEWS];
    int n;
} Views;

/* the next buffer: ``obj``'s contiguous bytes (writable when asked), a whole number of ``itemsize``-byte items;
   NULL, an error set, when ``obj`` has no such buffer (or an earlier one failed: pass its NULL along) */
static Py_buffer *view_of(Views *vs, PyObject *obj, int writable, Py_ssize_t itemsize, const char *what)
{
    if (PyErr_Occurred())
        return NULL;
    if (vs->n >= MAX_VIEWS) {
        PyErr_SetString(PyExc_SystemError, "too many buffers");
        return NULL;
    }
    Py_buffer *b = &vs->v[vs->n];
    if (PyObject_GetBuffer(obj, b, (writable ? PyBUF_WRITABLE : 0) | PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    vs->n++;
    if (itemsize > 1 && b->len % itemsize != 0) {
        PyErr_Format(PyExc_ValueError, "%s: a buffer of %zd-byte items", what, itemsize);
        return NULL;
    }
    return b;
}

static void release_views(Views *vs)
{
    while (vs->n > 0)
        PyBuffer_Release(&vs->v[--vs->n]);
}

/* whether an Arrow string array's n + 1 offsets are ascending and within its data's len bytes */
static int offsets_within(const int32_t *off, Py_ssize_t n, Py_ssize_t len)
{
    for (Py_ssize_t i = 0; i < n; i++)
        if (off[i] < 0 || off[i] > off[i + 1] || off[i + 1] > len)
            return 0;
    return 1;
}

/* the (offsets(int32, n + 1), data, out) arguments of a pass over an Arrow string array's buffers, ``out`` of
   ``out_item``-byte items for each string: its views taken and checked, n set; 0 (an error set) otherwise */
static int string_args(PyObject *args, Views *vs, Py_buffer **offsets, Py_buffer **data, Py_buffer **out,
                       Py_ssize_t out_item, Py_ssize_t *n)
{
    PyObject *offsets_obj, *data_obj, *out_obj;
    if (!PyArg_ParseTuple(args, "OOO", &offsets_obj, &data_obj, &out_obj))
        return 0;
    *offsets = view_of(vs, offsets_obj, 0, 4, "offsets");
    *data = view_of(vs, data_obj, 0, 1, "data");
    *out = view_of(vs, out_obj, 1, out_item, "out");
    if (*out == NULL)
        return 0;
    *n = (*offsets)->len / 4 - 1;
    if (*n < 0 || (*out)->len < *n * out_item || !offsets_within((*offsets)->buf, *n, (*data)->len)) {
        PyErr_SetString(PyExc_ValueError, "offsets outside the data, or an output too small");
        return 0;
    }
    return 1;
}

#endif
