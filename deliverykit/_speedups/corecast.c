/* C fast paths owned by the corecast package (twins in corecast/_fast.py). */
#include "speedups.h"

PyMethodDef dk_corecast_methods[] = {
    {NULL, NULL, 0, NULL},
};
