/* fia's CANN-compatible C API: aclnnIncreFlashAttentionV3 (host memory, see docs/c-api.md). C99 and C++. */
#ifndef FIA_CANN_ACLNNOP_ACLNN_INCRE_FLASH_ATTENTION_V3_H_
#define FIA_CANN_ACLNNOP_ACLNN_INCRE_FLASH_ATTENTION_V3_H_

#include <stdbool.h>
#include <stdint.h>

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Phase 1 of aclnnIncreFlashAttentionV3: validates the call and plans it.
 *  The decode operator (FIA-SPEC 3.3): query FP16/BF16 with S = 1 in inputLayout ("BSH", "BSND",
 *  "BNSD"); key/value lists (one tensor, or B tensors of batch 1); actualSeqLengths are the
 *  per-batch KEY/VALUE lengths (torch_npu actual_seq_lengths_kv). No preTokens/nextTokens/
 *  sparseMode, no softmaxLse. Computed as FIA with the IFA numerics of FIA-SPEC 25.3.
 *  Optional inputs are NULL when absent; int arrays are int64.
 *  On success *workspaceSize is the bytes of workspace the run needs and *executor the planned
 *  call (run it once with aclnnIncreFlashAttentionV3, which frees it,
 *  or free it with aclDestroyAclOpExecutor).
 *  Returns ACLNN_SUCCESS; ACLNN_ERR_PARAM_NULLPTR (161001) for a NULL query/key/value/attentionOut
 *  (or workspaceSize/executor); ACLNN_ERR_PARAM_INVALID (161002) for any rule of FIA-SPEC 20
 *  broken, or a feature fia does not implement; ACLNN_ERR_RUNTIME_ERROR (361001) for an internal
 *  failure. aclGetRecentErrMsg() names the offending argument by its name here (FIA-SPEC 2.4).
 *  Set FIA_ACLNN_STRICT=1 to also reject what an Ascend A2/A3 NPU would reject (FIA-SPEC 25.2). */
ACL_FUNC_VISIBILITY aclnnStatus aclnnIncreFlashAttentionV3GetWorkspaceSize(
    const aclTensor *query,
    const aclTensorList *key,
    const aclTensorList *value,
    const aclTensor *pseShift,
    const aclTensor *attenMask,
    const aclIntArray *actualSeqLengths,
    const aclTensor *dequantScale1,
    const aclTensor *quantScale1,
    const aclTensor *dequantScale2,
    const aclTensor *quantScale2,
    const aclTensor *quantOffset2,
    const aclTensor *antiquantScale,
    const aclTensor *antiquantOffset,
    const aclTensor *blocktable,
    int64_t numHeads,
    double scaleValue,
    char *inputLayout,
    int64_t numKeyValueHeads,
    int64_t blockSize,
    int64_t innerPrecise,
    const aclTensor *attentionOut,
    uint64_t *workspaceSize,
    aclOpExecutor **executor);

/** Phase 2 of aclnnIncreFlashAttentionV3: computes the planned call into attentionOut and frees
 *  the executor (also when it fails). workspace must hold workspaceSize bytes (may be NULL when 0);
 *  the stream runs synchronously. Returns ACLNN_SUCCESS; 161001 for a NULL executor; 161002 when
 *  workspaceSize is smaller than phase 1 asked for. */
ACL_FUNC_VISIBILITY aclnnStatus aclnnIncreFlashAttentionV3(void *workspace, uint64_t workspaceSize,
    aclOpExecutor *executor, const aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* FIA_CANN_ACLNNOP_ACLNN_INCRE_FLASH_ATTENTION_V3_H_ */
