/* fia's CANN-compatible C API: aclnnFusedInferAttentionScoreV4 (host memory, see docs/c-api.md). C99 and C++. */
#ifndef FIA_CANN_ACLNNOP_ACLNN_FUSED_INFER_ATTENTION_SCORE_V4_H_
#define FIA_CANN_ACLNNOP_ACLNN_FUSED_INFER_ATTENTION_SCORE_V4_H_

#include <stdbool.h>
#include <stdint.h>

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Phase 1 of aclnnFusedInferAttentionScoreV4: validates the call and plans it.
 *  query: FP16/BF16 (F32 as a fia extension) in inputLayout (FIA-SPEC 3.1); key/value: lists of
 *  one tensor, or B tensors of batch 1 (tensor list, FIA-SPEC 10); INT8 or INT32 (= packed INT4,
 *  last dimension multiplied by 8, FIA-SPEC 2.3 / 12.6) for KV antiquantization. Every other
 *  argument is described in FIA-SPEC 2.1 (V4). attentionOut: the query's dtype, the output layout's
 *  shape; softmaxLse: FLOAT [B, N, S, 1] ([T, N, 1] for TND/NTD) when softmaxLseFlag is true (it
 *  may be NULL, and is not written, when the flag is false; FIA-SPEC 17).
 *  Optional inputs are NULL when absent; int arrays are int64.
 *  On success *workspaceSize is the bytes of workspace the run needs and *executor the planned
 *  call (run it once with aclnnFusedInferAttentionScoreV4, which frees it,
 *  or free it with aclDestroyAclOpExecutor).
 *  Returns ACLNN_SUCCESS; ACLNN_ERR_PARAM_NULLPTR (161001) for a NULL query/key/value/attentionOut
 *  (or workspaceSize/executor); ACLNN_ERR_PARAM_INVALID (161002) for any rule of FIA-SPEC 20
 *  broken, or a feature fia does not implement; ACLNN_ERR_RUNTIME_ERROR (361001) for an internal
 *  failure. aclGetRecentErrMsg() names the offending argument by its name here (FIA-SPEC 2.4).
 *  Set FIA_ACLNN_STRICT=1 to also reject what an Ascend A2/A3 NPU would reject (FIA-SPEC 25.2). */
ACL_FUNC_VISIBILITY aclnnStatus aclnnFusedInferAttentionScoreV4GetWorkspaceSize(
    const aclTensor *query,
    const aclTensorList *key,
    const aclTensorList *value,
    const aclTensor *pseShiftOptional,
    const aclTensor *attenMaskOptional,
    const aclIntArray *actualSeqLengthsOptional,
    const aclIntArray *actualSeqLengthsKvOptional,
    const aclTensor *deqScale1Optional,
    const aclTensor *quantScale1Optional,
    const aclTensor *deqScale2Optional,
    const aclTensor *quantScale2Optional,
    const aclTensor *quantOffset2Optional,
    const aclTensor *antiquantScaleOptional,
    const aclTensor *antiquantOffsetOptional,
    const aclTensor *blockTableOptional,
    const aclTensor *queryPaddingSizeOptional,
    const aclTensor *kvPaddingSizeOptional,
    const aclTensor *keyAntiquantScaleOptional,
    const aclTensor *keyAntiquantOffsetOptional,
    const aclTensor *valueAntiquantScaleOptional,
    const aclTensor *valueAntiquantOffsetOptional,
    const aclTensor *keySharedPrefixOptional,
    const aclTensor *valueSharedPrefixOptional,
    const aclIntArray *actualSharedPrefixLenOptional,
    const aclTensor *queryRopeOptional,
    const aclTensor *keyRopeOptional,
    const aclTensor *keyRopeAntiquantScaleOptional,
    const aclTensor *dequantScaleQueryOptional,
    const aclTensor *learnableSinkOptional,
    int64_t numHeads,
    double scaleValue,
    int64_t preTokens,
    int64_t nextTokens,
    char *inputLayout,
    int64_t numKeyValueHeads,
    int64_t sparseMode,
    int64_t innerPrecise,
    int64_t blockSize,
    int64_t antiquantMode,
    bool softmaxLseFlag,
    int64_t keyAntiquantMode,
    int64_t valueAntiquantMode,
    int64_t queryQuantMode,
    const aclTensor *attentionOut,
    const aclTensor *softmaxLse,
    uint64_t *workspaceSize,
    aclOpExecutor **executor);

/** Phase 2 of aclnnFusedInferAttentionScoreV4: computes the planned call into attentionOut (and softmaxLse)
 *  and frees the executor (also when it fails). workspace must hold workspaceSize bytes (may be NULL when 0);
 *  the stream runs synchronously. Returns ACLNN_SUCCESS; 161001 for a NULL executor; 161002 when
 *  workspaceSize is smaller than phase 1 asked for. */
ACL_FUNC_VISIBILITY aclnnStatus aclnnFusedInferAttentionScoreV4(void *workspace, uint64_t workspaceSize,
    aclOpExecutor *executor, const aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* FIA_CANN_ACLNNOP_ACLNN_FUSED_INFER_ATTENTION_SCORE_V4_H_ */
