/* The buffers of the Python objects a C function of the package is given: taken one after another, released
   together (on an error too). Included by ckernel.c and readers/cparse.c. */
#ifndef NDCG_MLFLOW_CBUFFERS_H
#define NDCG_MLFLOW_CBUFFERS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

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

#endif
