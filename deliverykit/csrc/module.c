/* deliverykit._speedups: the module object; merges each file's method table. */
#include "speedups.h"

static PyMethodDef *const tables[] = {
    dk_core_methods, dk_corecast_methods, dk_m2c_methods, dk_swift_methods, dk_sim_methods,
};

static PyMethodDef merged[256];

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "deliverykit._speedups",
    "C fast paths for deliverykit; every function has a pure-Python twin.",
    -1, merged,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    size_t n = 0;
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++) {
        for (PyMethodDef *m = tables[t]; m->ml_name != NULL; m++) {
            if (n + 1 >= sizeof merged / sizeof merged[0]) {
                PyErr_SetString(PyExc_ImportError, "too many _speedups functions");
                return NULL;
            }
            merged[n++] = *m;
        }
    }
    merged[n].ml_name = NULL;
    return PyModule_Create(&moduledef);
}
