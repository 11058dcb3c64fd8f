// aclnnFusedInferAttentionScore V1-V4: the arguments of each version onto one fia::FiaArgs
// (FIA-SPEC 2.1-2.3), then the shared phases of executor.cpp.
#include "aclnnop/aclnn_fused_infer_attention_score.h"
#include "aclnnop/aclnn_fused_infer_attention_score_v2.h"
#include "aclnnop/aclnn_fused_infer_attention_score_v3.h"
#include "aclnnop/aclnn_fused_infer_attention_score_v4.h"
#include "capi/executor.hpp"

namespace fia::capi {
namespace {

/// Every V4 argument; the versions before V4 leave the ones they lack null / 0.
struct FiaCall {
  const aclTensor* query = nullptr;
  const aclTensorList* key = nullptr;
  const aclTensorList* value = nullptr;
  const aclTensor *pse_shift = nullptr, *atten_mask = nullptr;
  const aclIntArray *actual_seq_lengths = nullptr, *actual_seq_lengths_kv = nullptr;
  const aclTensor *dequant_scale1 = nullptr, *quant_scale1 = nullptr, *dequant_scale2 = nullptr;
  const aclTensor *quant_scale2 = nullptr, *quant_offset2 = nullptr;
  const aclTensor *antiquant_scale = nullptr, *antiquant_offset = nullptr, *block_table = nullptr;
  const aclTensor *query_padding_size = nullptr, *kv_padding_size = nullptr;
  const aclTensor *key_antiquant_scale = nullptr, *key_antiquant_offset = nullptr;
  const aclTensor *value_antiquant_scale = nullptr, *value_antiquant_offset = nullptr;
  const aclTensor *key_shared_prefix = nullptr, *value_shared_prefix = nullptr;
  const aclIntArray* actual_shared_prefix_len = nullptr;
  const aclTensor *query_rope = nullptr, *key_rope = nullptr, *key_rope_antiquant_scale = nullptr;
  const aclTensor *dequant_scale_query = nullptr, *learnable_sink = nullptr;
  int64_t num_heads = 1;
  double scale = 1.0;
  int64_t pre_tokens = kIntMax, next_tokens = kIntMax;
  const char* input_layout = nullptr;
  int64_t num_key_value_heads = 0, sparse_mode = 0, inner_precise = 0, block_size = 0, antiquant_mode = 0;
  bool softmax_lse_flag = false;
  int64_t key_antiquant_mode = 0, value_antiquant_mode = 0, query_quant_mode = 0;
  const aclTensor *attention_out = nullptr, *softmax_lse = nullptr;
};

aclnnStatus plan_fia(const EntryName& entry, const FiaCall& c, uint64_t* workspace_size, aclOpExecutor** executor) {
  FiaArgs a;
  Converter cv;
  cv.tensor(c.query, "query", &a.query);
  cv.list(c.key, "key", &a.key);
  cv.list(c.value, "value", &a.value);
  cv.tensor(c.pse_shift, "pse_shift", &a.pse_shift);
  cv.tensor(c.atten_mask, "atten_mask", &a.atten_mask);
  a.actual_seq_lengths = int_values(c.actual_seq_lengths);
  a.actual_seq_lengths_kv = int_values(c.actual_seq_lengths_kv);
  quant_tensors(cv, c, &a);
  cv.tensor(c.antiquant_scale, "antiquant_scale", &a.antiquant_scale);
  cv.tensor(c.antiquant_offset, "antiquant_offset", &a.antiquant_offset);
  cv.tensor(c.block_table, "block_table", &a.block_table);
  cv.tensor(c.query_padding_size, "query_padding_size", &a.query_padding_size);
  cv.tensor(c.kv_padding_size, "kv_padding_size", &a.kv_padding_size);
  cv.tensor(c.key_antiquant_scale, "key_antiquant_scale", &a.key_antiquant_scale);
  cv.tensor(c.key_antiquant_offset, "key_antiquant_offset", &a.key_antiquant_offset);
  cv.tensor(c.value_antiquant_scale, "value_antiquant_scale", &a.value_antiquant_scale);
  cv.tensor(c.value_antiquant_offset, "value_antiquant_offset", &a.value_antiquant_offset);
  cv.tensor(c.key_shared_prefix, "key_shared_prefix", &a.key_shared_prefix);
  cv.tensor(c.value_shared_prefix, "value_shared_prefix", &a.value_shared_prefix);
  a.actual_shared_prefix_len = int_values(c.actual_shared_prefix_len);
  cv.tensor(c.query_rope, "query_rope", &a.query_rope);
  cv.tensor(c.key_rope, "key_rope", &a.key_rope);
  cv.tensor(c.key_rope_antiquant_scale, "key_rope_antiquant_scale", &a.key_rope_antiquant_scale);
  cv.tensor(c.dequant_scale_query, "dequant_scale_query", &a.dequant_scale_query);
  cv.tensor(c.learnable_sink, "learnable_sink", &a.learnable_sink);
  a.num_heads = c.num_heads;
  a.scale = c.scale;
  a.pre_tokens = c.pre_tokens;
  a.next_tokens = c.next_tokens;
  a.num_key_value_heads = c.num_key_value_heads;
  a.sparse_mode = c.sparse_mode;
  a.inner_precise = c.inner_precise;
  a.block_size = c.block_size;
  a.antiquant_mode = c.antiquant_mode;
  a.softmax_lse_flag = c.softmax_lse_flag;
  a.key_antiquant_mode = c.key_antiquant_mode;
  a.value_antiquant_mode = c.value_antiquant_mode;
  a.query_quant_mode = c.query_quant_mode;
  a.entry_point = EntryPoint::kFusedInferAttentionScore;
  return plan_call(entry, cv, c.input_layout, a, c.attention_out, c.softmax_lse, workspace_size, executor);
}

constexpr EntryName kV1{Op::kFia, 1, "aclnnFusedInferAttentionScoreGetWorkspaceSize", "aclnnFusedInferAttentionScore"};
constexpr EntryName kV2{Op::kFia, 2, "aclnnFusedInferAttentionScoreV2GetWorkspaceSize",
                        "aclnnFusedInferAttentionScoreV2"};
constexpr EntryName kV3{Op::kFia, 3, "aclnnFusedInferAttentionScoreV3GetWorkspaceSize",
                        "aclnnFusedInferAttentionScoreV3"};
constexpr EntryName kV4{Op::kFia, 4, "aclnnFusedInferAttentionScoreV4GetWorkspaceSize",
                        "aclnnFusedInferAttentionScoreV4"};

/// The V1 arguments, which every version starts with.
FiaCall v1_call(const aclTensor* query, const aclTensorList* key, const aclTensorList* value, const aclTensor* pse,
                const aclTensor* mask, const aclIntArray* asl, const aclIntArray* aslkv, const aclTensor* dq1,
                const aclTensor* q1, const aclTensor* dq2, const aclTensor* q2, const aclTensor* qo2,
                const aclTensor* as, const aclTensor* ao, const aclTensor* bt, const aclTensor* qpad,
                const aclTensor* kvpad) {
  FiaCall c;
  c.query = query, c.key = key, c.value = value, c.pse_shift = pse, c.atten_mask = mask;
  c.actual_seq_lengths = asl, c.actual_seq_lengths_kv = aslkv;
  c.dequant_scale1 = dq1, c.quant_scale1 = q1, c.dequant_scale2 = dq2, c.quant_scale2 = q2, c.quant_offset2 = qo2;
  c.antiquant_scale = as, c.antiquant_offset = ao, c.block_table = bt;
  c.query_padding_size = qpad, c.kv_padding_size = kvpad;
  return c;
}

/// The attributes every version has, in their common order.
void set_attrs(FiaCall& c, int64_t numHeads, double scaleValue, int64_t preTokens, int64_t nextTokens,
               const char* inputLayout, int64_t numKeyValueHeads, int64_t sparseMode, int64_t innerPrecise,
               int64_t blockSize, int64_t antiquantMode, bool softmaxLseFlag, const aclTensor* attentionOut,
               const aclTensor* softmaxLse) {
  c.num_heads = numHeads, c.scale = scaleValue, c.pre_tokens = preTokens, c.next_tokens = nextTokens;
  c.input_layout = inputLayout, c.num_key_value_heads = numKeyValueHeads, c.sparse_mode = sparseMode;
  c.inner_precise = innerPrecise, c.block_size = blockSize, c.antiquant_mode = antiquantMode;
  c.softmax_lse_flag = softmaxLseFlag, c.attention_out = attentionOut, c.softmax_lse = softmaxLse;
}

/// The V2 additions.
void set_v2(FiaCall& c, const aclTensor* kas, const aclTensor* kao, const aclTensor* vas, const aclTensor* vao,
            const aclTensor* ksp, const aclTensor* vsp, const aclIntArray* asp, int64_t kam, int64_t vam) {
  c.key_antiquant_scale = kas, c.key_antiquant_offset = kao, c.value_antiquant_scale = vas;
  c.value_antiquant_offset = vao, c.key_shared_prefix = ksp, c.value_shared_prefix = vsp;
  c.actual_shared_prefix_len = asp, c.key_antiquant_mode = kam, c.value_antiquant_mode = vam;
}

}  // namespace
}  // namespace fia::capi

using namespace fia::capi;

extern "C" {

aclnnStatus aclnnFusedInferAttentionScoreGetWorkspaceSize(
    const aclTensor* query, const aclTensorList* key, const aclTensorList* value, const aclTensor* pseShift,
    const aclTensor* attenMask, const aclIntArray* actualSeqLengths, const aclIntArray* actualSeqLengthsKv,
    const aclTensor* deqScale1, const aclTensor* quantScale1, const aclTensor* deqScale2, const aclTensor* quantScale2,
    const aclTensor* quantOffset2, const aclTensor* antiquantScale, const aclTensor* antiquantOffset,
    const aclTensor* blockTable, const aclTensor* queryPaddingSize, const aclTensor* kvPaddingSize, int64_t numHeads,
    double scaleValue, int64_t preTokens, int64_t nextTokens, char* inputLayout, int64_t numKeyValueHeads,
    int64_t sparseMode, int64_t innerPrecise, int64_t blockSize, int64_t antiquantMode, bool softmaxLseFlag,
    const aclTensor* attentionOut, const aclTensor* softmaxLse, uint64_t* workspaceSize, aclOpExecutor** executor) {
  FiaCall c = v1_call(query, key, value, pseShift, attenMask, actualSeqLengths, actualSeqLengthsKv, deqScale1,
                      quantScale1, deqScale2, quantScale2, quantOffset2, antiquantScale, antiquantOffset, blockTable,
                      queryPaddingSize, kvPaddingSize);
  set_attrs(c, numHeads, scaleValue, preTokens, nextTokens, inputLayout, numKeyValueHeads, sparseMode, innerPrecise,
            blockSize, antiquantMode, softmaxLseFlag, attentionOut, softmaxLse);
  return plan_fia(kV1, c, workspaceSize, executor);
}

aclnnStatus aclnnFusedInferAttentionScore(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                          const aclrtStream stream) {
  return run_call(kV1.run_function, workspace, workspaceSize, executor);
}

aclnnStatus aclnnFusedInferAttentionScoreV2GetWorkspaceSize(
    const aclTensor* query, const aclTensorList* key, const aclTensorList* value, const aclTensor* pseShiftOptional,
    const aclTensor* attenMaskOptional, const aclIntArray* actualSeqLengthsOptional,
    const aclIntArray* actualSeqLengthsKvOptional, const aclTensor* deqScale1Optional,
    const aclTensor* quantScale1Optional, const aclTensor* deqScale2Optional, const aclTensor* quantScale2Optional,
    const aclTensor* quantOffset2Optional, const aclTensor* antiquantScaleOptional,
    const aclTensor* antiquantOffsetOptional, const aclTensor* blockTableOptional,
    const aclTensor* queryPaddingSizeOptional, const aclTensor* kvPaddingSizeOptional,
    const aclTensor* keyAntiquantScaleOptional, const aclTensor* keyAntiquantOffsetOptional,
    const aclTensor* valueAntiquantScaleOptional, const aclTensor* valueAntiquantOffsetOptional,
    const aclTensor* keySharedPrefixOptional, const aclTensor* valueSharedPrefixOptional,
    const aclIntArray* actualSharedPrefixLenOptional, int64_t numHeads, double scaleValue, int64_t preTokens,
    int64_t nextTokens, char* inputLayout, int64_t numKeyValueHeads, int64_t sparseMode, int64_t innerPrecise,
    int64_t blockSize, int64_t antiquantMode, bool softmaxLseFlag, int64_t keyAntiquantMode, int64_t valueAntiquantMode,
    const aclTensor* attentionOut, const aclTensor* softmaxLse, uint64_t* workspaceSize, aclOpExecutor** executor) {
  FiaCall c = v1_call(query, key, value, pseShiftOptional, attenMaskOptional, actualSeqLengthsOptional,
                      actualSeqLengthsKvOptional, deqScale1Optional, quantScale1Optional, deqScale2Optional,
                      quantScale2Optional, quantOffset2Optional, antiquantScaleOptional, antiquantOffsetOptional,
                      blockTableOptional, queryPaddingSizeOptional, kvPaddingSizeOptional);
  set_v2(c, keyAntiquantScaleOptional, keyAntiquantOffsetOptional, valueAntiquantScaleOptional,
         valueAntiquantOffsetOptional, keySharedPrefixOptional, valueSharedPrefixOptional,
         actualSharedPrefixLenOptional, keyAntiquantMode, valueAntiquantMode);
  set_attrs(c, numHeads, scaleValue, preTokens, nextTokens, inputLayout, numKeyValueHeads, sparseMode, innerPrecise,
            blockSize, antiquantMode, softmaxLseFlag, attentionOut, softmaxLse);
  return plan_fia(kV2, c, workspaceSize, executor);
}

aclnnStatus aclnnFusedInferAttentionScoreV2(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                            const aclrtStream stream) {
  return run_call(kV2.run_function, workspace, workspaceSize, executor);
}

aclnnStatus aclnnFusedInferAttentionScoreV3GetWorkspaceSize(
    const aclTensor* query, const aclTensorList* key, const aclTensorList* value, const aclTensor* pseShiftOptional,
    const aclTensor* attenMaskOptional, const aclIntArray* actualSeqLengthsOptional,
    const aclIntArray* actualSeqLengthsKvOptional, const aclTensor* deqScale1Optional,
    const aclTensor* quantScale1Optional, const aclTensor* deqScale2Optional, const aclTensor* quantScale2Optional,
    const aclTensor* quantOffset2Optional, const aclTensor* antiquantScaleOptional,
    const aclTensor* antiquantOffsetOptional, const aclTensor* blockTableOptional,
    const aclTensor* queryPaddingSizeOptional, const aclTensor* kvPaddingSizeOptional,
    const aclTensor* keyAntiquantScaleOptional, const aclTensor* keyAntiquantOffsetOptional,
    const aclTensor* valueAntiquantScaleOptional, const aclTensor* valueAntiquantOffsetOptional,
    const aclTensor* keySharedPrefixOptional, const aclTensor* valueSharedPrefixOptional,
    const aclIntArray* actualSharedPrefixLenOptional, const aclTensor* queryRopeOptional,
    const aclTensor* keyRopeOptional, const aclTensor* keyRopeAntiquantScaleOptional, int64_t numHeads,
    double scaleValue, int64_t preTokens, int64_t nextTokens, char* inputLayout, int64_t numKeyValueHeads,
    int64_t sparseMode, int64_t innerPrecise, int64_t blockSize, int64_t antiquantMode, bool softmaxLseFlag,
    int64_t keyAntiquantMode, int64_t valueAntiquantMode, const aclTensor* attentionOut, const aclTensor* softmaxLse,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  FiaCall c = v1_call(query, key, value, pseShiftOptional, attenMaskOptional, actualSeqLengthsOptional,
                      actualSeqLengthsKvOptional, deqScale1Optional, quantScale1Optional, deqScale2Optional,
                      quantScale2Optional, quantOffset2Optional, antiquantScaleOptional, antiquantOffsetOptional,
                      blockTableOptional, queryPaddingSizeOptional, kvPaddingSizeOptional);
  set_v2(c, keyAntiquantScaleOptional, keyAntiquantOffsetOptional, valueAntiquantScaleOptional,
         valueAntiquantOffsetOptional, keySharedPrefixOptional, valueSharedPrefixOptional,
         actualSharedPrefixLenOptional, keyAntiquantMode, valueAntiquantMode);
  c.query_rope = queryRopeOptional, c.key_rope = keyRopeOptional;
  c.key_rope_antiquant_scale = keyRopeAntiquantScaleOptional;
  set_attrs(c, numHeads, scaleValue, preTokens, nextTokens, inputLayout, numKeyValueHeads, sparseMode, innerPrecise,
            blockSize, antiquantMode, softmaxLseFlag, attentionOut, softmaxLse);
  return plan_fia(kV3, c, workspaceSize, executor);
}

aclnnStatus aclnnFusedInferAttentionScoreV3(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                            const aclrtStream stream) {
  return run_call(kV3.run_function, workspace, workspaceSize, executor);
}

aclnnStatus aclnnFusedInferAttentionScoreV4GetWorkspaceSize(
    const aclTensor* query, const aclTensorList* key, const aclTensorList* value, const aclTensor* pseShiftOptional,
    const aclTensor* attenMaskOptional, const aclIntArray* actualSeqLengthsOptional,
    const aclIntArray* actualSeqLengthsKvOptional, const aclTensor* deqScale1Optional,
    const aclTensor* quantScale1Optional, const aclTensor* deqScale2Optional, const aclTensor* quantScale2Optional,
    const aclTensor* quantOffset2Optional, const aclTensor* antiquantScaleOptional,
    const aclTensor* antiquantOffsetOptional, const aclTensor* blockTableOptional,
    const aclTensor* queryPaddingSizeOptional, const aclTensor* kvPaddingSizeOptional,
    const aclTensor* keyAntiquantScaleOptional, const aclTensor* keyAntiquantOffsetOptional,
    const aclTensor* valueAntiquantScaleOptional, const aclTensor* valueAntiquantOffsetOptional,
    const aclTensor* keySharedPrefixOptional, const aclTensor* valueSharedPrefixOptional,
    const aclIntArray* actualSharedPrefixLenOptional, const aclTensor* queryRopeOptional,
    const aclTensor* keyRopeOptional, const aclTensor* keyRopeAntiquantScaleOptional,
    const aclTensor* dequantScaleQueryOptional, const aclTensor* learnableSinkOptional, int64_t numHeads,
    double scaleValue, int64_t preTokens, int64_t nextTokens, char* inputLayout, int64_t numKeyValueHeads,
    int64_t sparseMode, int64_t innerPrecise, int64_t blockSize, int64_t antiquantMode, bool softmaxLseFlag,
    int64_t keyAntiquantMode, int64_t valueAntiquantMode, int64_t queryQuantMode, const aclTensor* attentionOut,
    const aclTensor* softmaxLse, uint64_t* workspaceSize, aclOpExecutor** executor) {
  FiaCall c = v1_call(query, key, value, pseShiftOptional, attenMaskOptional, actualSeqLengthsOptional,
                      actualSeqLengthsKvOptional, deqScale1Optional, quantScale1Optional, deqScale2Optional,
                      quantScale2Optional, quantOffset2Optional, antiquantScaleOptional, antiquantOffsetOptional,
                      blockTableOptional, queryPaddingSizeOptional, kvPaddingSizeOptional);
  set_v2(c, keyAntiquantScaleOptional, keyAntiquantOffsetOptional, valueAntiquantScaleOptional,
         valueAntiquantOffsetOptional, keySharedPrefixOptional, valueSharedPrefixOptional,
         actualSharedPrefixLenOptional, keyAntiquantMode, valueAntiquantMode);
  c.query_rope = queryRopeOptional, c.key_rope = keyRopeOptional;
  c.key_rope_antiquant_scale = keyRopeAntiquantScaleOptional;
  c.dequant_scale_query = dequantScaleQueryOptional, c.learnable_sink = learnableSinkOptional;
  c.query_quant_mode = queryQuantMode;
  set_attrs(c, numHeads, scaleValue, preTokens, nextTokens, inputLayout, numKeyValueHeads, sparseMode, innerPrecise,
            blockSize, antiquantMode, softmaxLseFlag, attentionOut, softmaxLse);
  return plan_fia(kV4, c, workspaceSize, executor);
}

aclnnStatus aclnnFusedInferAttentionScoreV4(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                            const aclrtStream stream) {
  return run_call(kV4.run_function, workspace, workspaceSize, executor);
}

}  // extern "C"
