/* fia's CANN-compatible C API: the AscendCL entry header (runtime on host memory).
 * C99 and C++. See docs/c-api.md. */
#ifndef FIA_CANN_ACL_ACL_H_
#define FIA_CANN_ACL_ACL_H_

#include "acl/acl_base.h"
#include "acl/acl_rt.h"

#endif /* FIA_CANN_ACL_ACL_H_ */
