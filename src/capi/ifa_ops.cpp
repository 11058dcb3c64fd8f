// aclnnIncreFlashAttention V1-V4 (decode): mapped onto fia::FiaArgs with the IFA entry point
// (FIA-SPEC 25.3). IFA's actualSeqLengths are the key/value lengths (actual_seq_lengths_kv);
// it has no pre/next tokens, sparse mode or softmaxLse.
#include "aclnnop/aclnn_incre_flash_attention.h"
#include "aclnnop/aclnn_incre_flash_attention_v2.h"
#include "aclnnop/aclnn_incre_flash_attention_v3.h"
#include "aclnnop/aclnn_incre_flash_attention_v4.h"
#include "capi/executor.hpp"

namespace fia::capi {
namespace {

/// Every IFA V4 argument; older versions leave what they lack null, and innerPrecise at IFA's
/// default 1 (torch_npu npu_incre_flash_attention's inner_precise=1).
struct IfaCall {
  const aclTensor* query = nullptr;
  const aclTensorList *key = nullptr, *value = nullptr;
  const aclTensor *pse_shift = nullptr, *atten_mask = nullptr;
  const aclIntArray* actual_seq_lengths = nullptr;
  const aclTensor *dequant_scale1 = nullptr, *quant_scale1 = nullptr, *dequant_scale2 = nullptr;
  const aclTensor *quant_scale2 = nullptr, *quant_offset2 = nullptr;
  const aclTensor *antiquant_scale = nullptr, *antiquant_offset = nullptr, *block_table = nullptr;
  const aclTensor* kv_padding_size = nullptr;
  int64_t num_heads = 1;
  double scale = 1.0;
  const char* input_layout = nullptr;
  int64_t num_key_value_heads = 0, block_size = 0, inner_precise = 1;
  const aclTensor* attention_out = nullptr;
};

aclnnStatus plan_ifa(const EntryName& entry, const IfaCall& c, uint64_t* workspace_size, aclOpExecutor** executor) {
  FiaArgs a;
  Converter cv;
  cv.tensor(c.query, "query", &a.query);
  cv.list(c.key, "key", &a.key);
  cv.list(c.value, "value", &a.value);
  cv.tensor(c.pse_shift, "pse_shift", &a.pse_shift);
  cv.tensor(c.atten_mask, "atten_mask", &a.atten_mask);
  a.actual_seq_lengths_kv = int_values(c.actual_seq_lengths);
  quant_tensors(cv, c, &a);
  cv.tensor(c.antiquant_scale, "antiquant_scale", &a.antiquant_scale);
  cv.tensor(c.antiquant_offset, "antiquant_offset", &a.antiquant_offset);
  cv.tensor(c.block_table, "block_table", &a.block_table);
  cv.tensor(c.kv_padding_size, "kv_padding_size", &a.kv_padding_size);
  a.num_heads = c.num_heads;
  a.scale = c.scale;
  a.num_key_value_heads = c.num_key_value_heads;
  a.block_size = c.block_size;
  a.inner_precise = c.inner_precise;
  a.entry_point = EntryPoint::kIncreFlashAttention;
  return plan_call(entry, cv, c.input_layout, a, c.attention_out, nullptr, workspace_size, executor);
}

IfaCall v1_call(const aclTensor* query, const aclTensorList* key, const aclTensorList* value, const aclTensor* pse,
                const aclTensor* mask, const aclIntArray* asl, int64_t numHeads, double scaleValue,
                const char* inputLayout, int64_t numKeyValueHeads, const aclTensor* out) {
  IfaCall c;
  c.query = query, c.key = key, c.value = value, c.pse_shift = pse, c.atten_mask = mask, c.actual_seq_lengths = asl;
  c.num_heads = numHeads, c.scale = scaleValue, c.input_layout = inputLayout;
  c.num_key_value_heads = numKeyValueHeads, c.attention_out = out;
  return c;
}

void set_quant(IfaCall& c, const aclTensor* dq1, const aclTensor* q1, const aclTensor* dq2, const aclTensor* q2,
               const aclTensor* qo2) {
  c.dequant_scale1 = dq1, c.quant_scale1 = q1, c.dequant_scale2 = dq2, c.quant_scale2 = q2, c.quant_offset2 = qo2;
}

void set_v3(IfaCall& c, const aclTensor* as, const aclTensor* ao, const aclTensor* bt, int64_t blockSize,
            int64_t innerPrecise) {
  c.antiquant_scale = as, c.antiquant_offset = ao, c.block_table = bt;
  c.block_size = blockSize, c.inner_precise = innerPrecise;
}

constexpr EntryName kV1{Op::kIfa, 1, "aclnnIncreFlashAttentionGetWorkspaceSize", "aclnnIncreFlashAttention"};
constexpr EntryName kV2{Op::kIfa, 2, "aclnnIncreFlashAttentionV2GetWorkspaceSize", "aclnnIncreFlashAttentionV2"};
constexpr EntryName kV3{Op::kIfa, 3, "aclnnIncreFlashAttentionV3GetWorkspaceSize", "aclnnIncreFlashAttentionV3"};
constexpr EntryName kV4{Op::kIfa, 4, "aclnnIncreFlashAttentionV4GetWorkspaceSize", "aclnnIncreFlashAttentionV4"};

}  // namespace
}  // namespace fia::capi

using namespace fia::capi;

extern "C" {

aclnnStatus aclnnIncreFlashAttentionGetWorkspaceSize(const aclTensor* query, const aclTensorList* key,
                                                     const aclTensorList* value, const aclTensor* pseShift,
                                                     const aclTensor* attenMask, const aclIntArray* actualSeqLengths,
                                                     int64_t numHeads, double scaleValue, char* inputLayout,
                                                     int64_t numKeyValueHeads, const aclTensor* attentionOut,
                                                     uint64_t* workspaceSize, aclOpExecutor** executor) {
  const IfaCall c = v1_call(query, key, value, pseShift, attenMask, actualSeqLengths, numHeads, scaleValue, inputLayout,
                            numKeyValueHeads, attentionOut);
  return plan_ifa(kV1, c, workspaceSize, executor);
}

aclnnStatus aclnnIncreFlashAttention(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                     const aclrtStream stream) {
  return run_call(kV1.run_function, workspace, workspaceSize, executor);
}

aclnnStatus aclnnIncreFlashAttentionV2GetWorkspaceSize(
    const aclTensor* query, const aclTensorList* key, const aclTensorList* value, const aclTensor* pseShift,
    const aclTensor* attenMask, const aclIntArray* actualSeqLengths, const aclTensor* dequantScale1,
    const aclTensor* quantScale1, const aclTensor* dequantScale2, const aclTensor* quantScale2,
    const aclTensor* quantOffset2, int64_t numHeads, double scaleValue, char* inputLayout, int64_t numKeyValueHeads,
    const aclTensor* attentionOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  IfaCall c = v1_call(query, key, value, pseShift, attenMask, actualSeqLengths, numHeads, scaleValue, inputLayout,
                      numKeyValueHeads, attentionOut);
  set_quant(c, dequantScale1, quantScale1, dequantScale2, quantScale2, quantOffset2);
  return plan_ifa(kV2, c, workspaceSize, executor);
}

aclnnStatus aclnnIncreFlashAttentionV2(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                       const aclrtStream stream) {
  return run_call(kV2.run_function, workspace, workspaceSize, executor);
}

aclnnStatus aclnnIncreFlashAttentionV3GetWorkspaceSize(
    const aclTensor* query, const aclTensorList* key, const aclTensorList* value, const aclTensor* pseShift,
    const aclTensor* attenMask, const aclIntArray* actualSeqLengths, const aclTensor* dequantScale1,
    const aclTensor* quantScale1, const aclTensor* dequantScale2, const aclTensor* quantScale2,
    const aclTensor* quantOffset2, const aclTensor* antiquantScale, const aclTensor* antiquantOffset,
    const aclTensor* blocktable, int64_t numHeads, double scaleValue, char* inputLayout, int64_t numKeyValueHeads,
    int64_t blockSize, int64_t innerPrecise, const aclTensor* attentionOut, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  IfaCall c = v1_call(query, key, value, pseShift, attenMask, actualSeqLengths, numHeads, scaleValue, inputLayout,
                      numKeyValueHeads, attentionOut);
  set_quant(c, dequantScale1, quantScale1, dequantScale2, quantScale2, quantOffset2);
  set_v3(c, antiquantScale, antiquantOffset, blocktable, blockSize, innerPrecise);
  return plan_ifa(kV3, c, workspaceSize, executor);
}

aclnnStatus aclnnIncreFlashAttentionV3(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                       const aclrtStream stream) {
  return run_call(kV3.run_function, workspace, workspaceSize, executor);
}

aclnnStatus aclnnIncreFlashAttentionV4GetWorkspaceSize(
    const aclTensor* query, const aclTensorList* key, const aclTensorList* value, const aclTensor* pseShift,
    const aclTensor* attenMask, const aclIntArray* actualSeqLengths, const aclTensor* dequantScale1,
    const aclTensor* quantScale1, const aclTensor* dequantScale2, const aclTensor* quantScale2,
    const aclTensor* quantOffset2, const aclTensor* antiquantScale, const aclTensor* antiquantOffset,
    const aclTensor* blocktable, const aclTensor* kvPaddingSize, int64_t numHeads, double scaleValue, char* inputLayout,
    int64_t numKeyValueHeads, int64_t blockSize, int64_t innerPrecise, const aclTensor* attentionOut,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  IfaCall c = v1_call(query, key, value, pseShift, attenMask, actualSeqLengths, numHeads, scaleValue, inputLayout,
                      numKeyValueHeads, attentionOut);
  set_quant(c, dequantScale1, quantScale1, dequantScale2, quantScale2, quantOffset2);
  set_v3(c, antiquantScale, antiquantOffset, blocktable, blockSize, innerPrecise);
  c.kv_padding_size = kvPaddingSize;
  return plan_ifa(kV4, c, workspaceSize, executor);
}

aclnnStatus aclnnIncreFlashAttentionV4(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                       const aclrtStream stream) {
  return run_call(kV4.run_function, workspace, workspaceSize, executor);
}

}  // extern "C"
