// ctest capi_securec_cpp: securec_test.c compiled as C++ (securec.h must work in both).
#include "securec_test.c"
