/* fia's CANN-compatible C API: aclnnPromptFlashAttentionV2 (host memory, see docs/c-api.md). C99 and C++. */
#ifndef FIA_CANN_ACLNNOP_ACLNN_PROMPT_FLASH_ATTENTION_V2_H_
#define FIA_CANN_ACLNNOP_ACLNN_PROMPT_FLASH_ATTENTION_V2_H_

#include <stdbool.h>
#include <stdint.h>

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Phase 1 of aclnnPromptFlashAttentionV2: validates the call and plans it.
 *  The prefill operator: query/key/value single tensors (FP16/BF16) in inputLayout; masks and
 *  sparse modes per FIA-SPEC 6, actualSeqLengths(Kv) per FIA-SPEC 7. No softmaxLse. Computed as
 *  FIA with the PFA numerics of FIA-SPEC 25.3.
 *  Optional inputs are NULL when absent; int arrays are int64.
 *  On success *workspaceSize is the bytes of workspace the run needs and *executor the planned
 *  call (run it once with aclnnPromptFlashAttentionV2, which frees it,
 *  or free it with aclDestroyAclOpExecutor).
 *  Returns ACLNN_SUCCESS; ACLNN_ERR_PARAM_NULLPTR (161001) for a NULL query/key/value/attentionOut
 *  (or workspaceSize/executor); ACLNN_ERR_PARAM_INVALID (161002) for any rule of FIA-SPEC 20
 *  broken, or a feature fia does not implement; ACLNN_ERR_RUNTIME_ERROR (361001) for an internal
 *  failure. aclGetRecentErrMsg() names the offending argument by its name here (FIA-SPEC 2.4).
 *  Set FIA_ACLNN_STRICT=1 to also reject what an Ascend A2/A3 NPU would reject (FIA-SPEC 25.2). */
ACL_FUNC_VISIBILITY aclnnStatus aclnnPromptFlashAttentionV2GetWorkspaceSize(
    const aclTensor *query,
    const aclTensor *key,
    const aclTensor *value,
    const aclTensor *pseShift,
    const aclTensor *attenMask,
    const aclIntArray *actualSeqLengths,
    const aclIntArray *actualSeqLengthsKv,
    const aclTensor *deqScale1,
    const aclTensor *quantScale1,
    const aclTensor *deqScale2,
    const aclTensor *quantScale2,
    const aclTensor *quantOffset2,
    int64_t numHeads,
    double scaleValue,
    int64_t preTokens,
    int64_t nextTokens,
    char *inputLayout,
    int64_t numKeyValueHeads,
    int64_t sparseMode,
    const aclTensor *attentionOut,
    uint64_t *workspaceSize,
    aclOpExecutor **executor);

/** Phase 2 of aclnnPromptFlashAttentionV2: computes the planned call into attentionOut and frees
 *  the executor (also when it fails). workspace must hold workspaceSize bytes (may be NULL when 0);
 *  the stream runs synchronously. Returns ACLNN_SUCCESS; 161001 for a NULL executor; 161002 when
 *  workspaceSize is smaller than phase 1 asked for. */
ACL_FUNC_VISIBILITY aclnnStatus aclnnPromptFlashAttentionV2(void *workspace, uint64_t workspaceSize,
    aclOpExecutor *executor, const aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* FIA_CANN_ACLNNOP_ACLNN_PROMPT_FLASH_ATTENTION_V2_H_ */
