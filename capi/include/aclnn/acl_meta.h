/* fia's CANN-compatible C API: aclnn handle types and their constructors.
 * Same names and ABI as CANN's aclnn/acl_meta.h, but valid C99 as well as C++.
 * See docs/c-api.md. */
#ifndef FIA_CANN_ACLNN_ACL_META_H_
#define FIA_CANN_ACLNN_ACL_META_H_

#include <stdbool.h>
#include <stdint.h>

#include "acl/acl_base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct aclOpExecutor aclOpExecutor;
typedef struct aclTensor aclTensor;
typedef struct aclIntArray aclIntArray;
typedef struct aclBoolArray aclBoolArray;
typedef struct aclTensorList aclTensorList;

typedef int32_t aclnnStatus;

/** Creates a tensor handle over caller memory (nothing is copied or owned).
 *  Element (i0, i1, ...) is at tensorData + (offset + sum(ik * stride[k])) elements; strides and
 *  offset count elements of dataType. storageDims must be given (for fia only its element count
 *  matters: the view must fit in it). format: ND (or the 4-D names NCHW/NHWC/NC/NCL/NCDHW/NDHWC,
 *  read as ND); other formats are accepted here and rejected by the operators.
 *  Returns NULL (message in aclGetRecentErrMsg) when viewDims/stride/storageDims is null with a
 *  non-zero count, a dimension or the offset is negative, or the view does not fit the storage.
 *  tensorData may be NULL only for an empty tensor (FIA-SPEC 19). */
ACL_FUNC_VISIBILITY aclTensor *aclCreateTensor(const int64_t *viewDims, uint64_t viewDimsNum, aclDataType dataType,
                                               const int64_t *stride, int64_t offset, aclFormat format,
                                               const int64_t *storageDims, uint64_t storageDimsNum,
                                               void *tensorData);

/** Copies `size` int64 values into a new array handle (value may be NULL when size is 0).
 *  Returns NULL when value is NULL with size > 0. */
ACL_FUNC_VISIBILITY aclIntArray *aclCreateIntArray(const int64_t *value, uint64_t size);

/** Copies `size` bools into a new array handle. Returns NULL when value is NULL with size > 0. */
ACL_FUNC_VISIBILITY aclBoolArray *aclCreateBoolArray(const bool *value, uint64_t size);

/** Makes a list of `size` tensors (size >= 1). The list keeps its own copies of the tensor
 *  descriptions, so the tensors and the list may be destroyed in any order and independently.
 *  Returns NULL when value or one of its tensors is NULL, or size is 0. */
ACL_FUNC_VISIBILITY aclTensorList *aclCreateTensorList(const aclTensor *const *value, uint64_t size);

/** Destroys a handle. NULL is a no-op returning 0 (ACLNN_SUCCESS). Destroying a handle twice is
 *  undefined behaviour, as in CANN. */
ACL_FUNC_VISIBILITY aclnnStatus aclDestroyTensor(const aclTensor *tensor);
ACL_FUNC_VISIBILITY aclnnStatus aclDestroyIntArray(const aclIntArray *array);
ACL_FUNC_VISIBILITY aclnnStatus aclDestroyBoolArray(const aclBoolArray *array);
ACL_FUNC_VISIBILITY aclnnStatus aclDestroyTensorList(const aclTensorList *array);

/** Frees an executor from a GetWorkspaceSize call that will not be run (running it frees it).
 *  NULL is a no-op. */
ACL_FUNC_VISIBILITY aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor *executor);

#ifdef __cplusplus
}
#endif

#endif /* FIA_CANN_ACLNN_ACL_META_H_ */
