// aclnnPromptFlashAttention V1-V3 (prefill): single-tensor key/value mapped onto fia::FiaArgs
// with the PFA entry point (FIA-SPEC 25.3). No softmaxLse; V1 has no actualSeqLengthsKv or
// sparseMode (0), V1/V2 no innerPrecise (PFA's default 1, as torch_npu passes).
#include "aclnnop/aclnn_prompt_flash_attention.h"
#include "aclnnop/aclnn_prompt_flash_attention_v2.h"
#include "aclnnop/aclnn_prompt_flash_attention_v3.h"
#include "capi/executor.hpp"

namespace fia::capi {
namespace {

struct PfaCall {
  const aclTensor *query = nullptr, *key = nullptr, *value = nullptr;
  const aclTensor *pse_shift = nullptr, *atten_mask = nullptr;
  const aclIntArray *actual_seq_lengths = nullptr, *actual_seq_lengths_kv = nullptr;
  const aclTensor *dequant_scale1 = nullptr, *quant_scale1 = nullptr, *dequant_scale2 = nullptr;
  const aclTensor *quant_scale2 = nullptr, *quant_offset2 = nullptr;
  int64_t num_heads = 1;
  double scale = 1.0;
  int64_t pre_tokens = kIntMax, next_tokens = 0;
  const char* input_layout = nullptr;
  int64_t num_key_value_heads = 0, sparse_mode = 0, inner_precise = 1;
  const aclTensor* attention_out = nullptr;
};

aclnnStatus plan_pfa(const EntryName& entry, const PfaCall& c, uint64_t* workspace_size, aclOpExecutor** executor) {
  FiaArgs a;
  Converter cv;
  cv.tensor(c.query, "query", &a.query);
  cv.single(c.key, "key", &a.key);
  cv.single(c.value, "value", &a.value);
  cv.tensor(c.pse_shift, "pse_shift", &a.pse_shift);
  cv.tensor(c.atten_mask, "atten_mask", &a.atten_mask);
  a.actual_seq_lengths = int_values(c.actual_seq_lengths);
  a.actual_seq_lengths_kv = int_values(c.actual_seq_lengths_kv);
  quant_tensors(cv, c, &a);
  a.num_heads = c.num_heads;
  a.scale = c.scale;
  a.pre_tokens = c.pre_tokens;
  a.next_tokens = c.next_tokens;
  a.num_key_value_heads = c.num_key_value_heads;
  a.sparse_mode = c.sparse_mode;
  a.inner_precise = c.inner_precise;
  a.entry_point = EntryPoint::kPromptFlashAttention;
  return plan_call(entry, cv, c.input_layout, a, c.attention_out, nullptr, workspace_size, executor);
}

PfaCall v1_call(const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* pse,
                const aclTensor* mask, const aclIntArray* asl, int64_t numHeads, double scaleValue, int64_t preTokens,
                int64_t nextTokens, const char* inputLayout, int64_t numKeyValueHeads, const aclTensor* out) {
  PfaCall c;
  c.query = query, c.key = key, c.value = value, c.pse_shift = pse, c.atten_mask = mask, c.actual_seq_lengths = asl;
  c.num_heads = numHeads, c.scale = scaleValue, c.pre_tokens = preTokens, c.next_tokens = nextTokens;
  c.input_layout = inputLayout, c.num_key_value_heads = numKeyValueHeads, c.attention_out = out;
  return c;
}

void set_v2(PfaCall& c, const aclIntArray* aslkv, const aclTensor* dq1, const aclTensor* q1, const aclTensor* dq2,
            const aclTensor* q2, const aclTensor* qo2, int64_t sparseMode) {
  c.actual_seq_lengths_kv = aslkv, c.dequant_scale1 = dq1, c.quant_scale1 = q1, c.dequant_scale2 = dq2;
  c.quant_scale2 = q2, c.quant_offset2 = qo2, c.sparse_mode = sparseMode;
}

constexpr EntryName kV1{Op::kPfa, 1, "aclnnPromptFlashAttentionGetWorkspaceSize", "aclnnPromptFlashAttention"};
constexpr EntryName kV2{Op::kPfa, 2, "aclnnPromptFlashAttentionV2GetWorkspaceSize", "aclnnPromptFlashAttentionV2"};
constexpr EntryName kV3{Op::kPfa, 3, "aclnnPromptFlashAttentionV3GetWorkspaceSize", "aclnnPromptFlashAttentionV3"};

}  // namespace
}  // namespace fia::capi

using namespace fia::capi;

extern "C" {

aclnnStatus aclnnPromptFlashAttentionGetWorkspaceSize(const aclTensor* query, const aclTensor* key,
                                                      const aclTensor* value, const aclTensor* pseShift,
                                                      const aclTensor* attenMask, const aclIntArray* actualSeqLengths,
                                                      int64_t numHeads, double scaleValue, int64_t preTokens,
                                                      int64_t nextTokens, char* inputLayout, int64_t numKeyValueHeads,
                                                      const aclTensor* attentionOut, uint64_t* workspaceSize,
                                                      aclOpExecutor** executor) {
  const PfaCall c = v1_call(query, key, value, pseShift, attenMask, actualSeqLengths, numHeads, scaleValue, preTokens,
                            nextTokens, inputLayout, numKeyValueHeads, attentionOut);
  return plan_pfa(kV1, c, workspaceSize, executor);
}

aclnnStatus aclnnPromptFlashAttention(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                      const aclrtStream stream) {
  return run_call(kV1.run_function, workspace, workspaceSize, executor);
}

aclnnStatus aclnnPromptFlashAttentionV2GetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* pseShift,
    const aclTensor* attenMask, const aclIntArray* actualSeqLengths, const aclIntArray* actualSeqLengthsKv,
    const aclTensor* deqScale1, const aclTensor* quantScale1, const aclTensor* deqScale2, const aclTensor* quantScale2,
    const aclTensor* quantOffset2, int64_t numHeads, double scaleValue, int64_t preTokens, int64_t nextTokens,
    char* inputLayout, int64_t numKeyValueHeads, int64_t sparseMode, const aclTensor* attentionOut,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  PfaCall c = v1_call(query, key, value, pseShift, attenMask, actualSeqLengths, numHeads, scaleValue, preTokens,
                      nextTokens, inputLayout, numKeyValueHeads, attentionOut);
  set_v2(c, actualSeqLengthsKv, deqScale1, quantScale1, deqScale2, quantScale2, quantOffset2, sparseMode);
  return plan_pfa(kV2, c, workspaceSize, executor);
}

aclnnStatus aclnnPromptFlashAttentionV2(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                        const aclrtStream stream) {
  return run_call(kV2.run_function, workspace, workspaceSize, executor);
}

aclnnStatus aclnnPromptFlashAttentionV3GetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* pseShift,
    const aclTensor* attenMask, const aclIntArray* actualSeqLengths, const aclIntArray* actualSeqLengthsKv,
    const aclTensor* deqScale1, const aclTensor* quantScale1, const aclTensor* deqScale2, const aclTensor* quantScale2,
    const aclTensor* quantOffset2, int64_t numHeads, double scaleValue, int64_t preTokens, int64_t nextTokens,
    char* inputLayout, int64_t numKeyValueHeads, int64_t sparseMode, int64_t innerPrecise,
    const aclTensor* attentionOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  PfaCall c = v1_call(query, key, value, pseShift, attenMask, actualSeqLengths, numHeads, scaleValue, preTokens,
                      nextTokens, inputLayout, numKeyValueHeads, attentionOut);
  set_v2(c, actualSeqLengthsKv, deqScale1, quantScale1, deqScale2, quantScale2, quantOffset2, sparseMode);
  c.inner_precise = innerPrecise;
  return plan_pfa(kV3, c, workspaceSize, executor);
}

aclnnStatus aclnnPromptFlashAttentionV3(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                        const aclrtStream stream) {
  return run_call(kV3.run_function, workspace, workspaceSize, executor);
}

}  // extern "C"
