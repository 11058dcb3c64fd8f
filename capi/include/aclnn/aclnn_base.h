/* fia's CANN-compatible C API: aclnn status codes and library init.
 * The ACLNN_* values are CANN's (its op-developer header opdev/op_errno.h); fia defines them here
 * so that callers can compare the results of the operators. C99 and C++. */
#ifndef FIA_CANN_ACLNN_ACLNN_BASE_H_
#define FIA_CANN_ACLNN_ACLNN_BASE_H_

#include "aclnn/acl_meta.h"

#define ACLNN_SUCCESS 0
#define ACLNN_ERR_PARAM_NULLPTR 161001 /* a required tensor or an out-pointer is NULL */
#define ACLNN_ERR_PARAM_INVALID 161002 /* a rule of FIA-SPEC 20 is broken, or not supported by fia */
#define ACLNN_ERR_RUNTIME_ERROR 361001 /* internal failure */

#ifdef __cplusplus
extern "C" {
#endif

/** Initialises the operator library (nothing to do; configPath is not read). Returns 0. */
ACL_FUNC_VISIBILITY aclnnStatus aclnnInit(const char *configPath);

/** Ends the operator library. Returns 0. */
ACL_FUNC_VISIBILITY aclnnStatus aclnnFinalize(void);

#ifdef __cplusplus
}
#endif

#endif /* FIA_CANN_ACLNN_ACLNN_BASE_H_ */
