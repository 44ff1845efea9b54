/* C fast paths owned by the m2c package (twins in m2c/_fast.py). */
#include "speedups.h"

PyMethodDef dk_m2c_methods[] = {
    {NULL, NULL, 0, NULL},
};
