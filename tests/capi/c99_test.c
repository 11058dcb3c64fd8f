/* ctest capi_c99: every C API header compiles as C99 (-pedantic-errors) and a C program can
 * call the operators through libfia.so: FIA V1 and PFA V1 on uniform data (the output is the
 * mean of V), the null-argument status, and aclGetRecentErrMsg. */
#include <stdio.h>
#include <string.h>

#include "acl/acl.h"
#include "aclnn/acl_meta.h"
#include "aclnn/aclnn_base.h"
#include "aclnnop/aclnn_fused_infer_attention_score.h"
#include "aclnnop/aclnn_fused_infer_attention_score_v2.h"
#include "aclnnop/aclnn_fused_infer_attention_score_v3.h"
#include "aclnnop/aclnn_fused_infer_attention_score_v4.h"
#include "aclnnop/aclnn_incre_flash_attention.h"
#include "aclnnop/aclnn_incre_flash_attention_v2.h"
#include "aclnnop/aclnn_incre_flash_attention_v3.h"
#include "aclnnop/aclnn_incre_flash_attention_v4.h"
#include "aclnnop/aclnn_prompt_flash_attention.h"
#include "aclnnop/aclnn_prompt_flash_attention_v2.h"
#include "aclnnop/aclnn_prompt_flash_attention_v3.h"

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: %s failed (%s)\n", __FILE__, __LINE__, #cond, aclGetRecentErrMsg()); \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

enum { B = 1, N = 2, S = 4, D = 8 };

static aclTensor *bnsd(aclFloat16 *data, int64_t s) {
  const int64_t dims[4] = {B, N, s, D};
  const int64_t strides[4] = {N * s * D, s * D, D, 1};
  return aclCreateTensor(dims, 4, ACL_FLOAT16, strides, 0, ACL_FORMAT_ND, dims, 4, data);
}

/* Every value of `out` (n elements) is `want`. */
static int all_equal(const aclFloat16 *out, int n, float want) {
  int i;
  for (i = 0; i < n; ++i)
    if (aclFloat16ToFloat(out[i]) != want) return 0;
  return 1;
}

int main(void) {
  static aclFloat16 q[B * N * S * D], k[B * N * S * D], v[B * N * S * D], out[B * N * S * D];
  aclTensor *query, *key, *value, *attention_out;
  const aclTensor *key_items[1], *value_items[1];
  aclTensorList *keys, *values;
  uint64_t workspace_size = 0;
  aclOpExecutor *executor = NULL;
  char layout[] = "BNSD";
  int i;

  CHECK(aclInit(NULL) == ACL_SUCCESS);
  CHECK(aclDataTypeSize(ACL_FLOAT16) == 2 && aclDataTypeSize(ACL_INT64) == 8);
  for (i = 0; i < B * N * S * D; ++i) {
    q[i] = aclFloatToFloat16(0.5f);
    k[i] = aclFloatToFloat16(0.25f);
    v[i] = aclFloatToFloat16(3.0f);
  }
  query = bnsd(q, 1);
  key = bnsd(k, S);
  value = bnsd(v, S);
  attention_out = bnsd(out, 1);
  CHECK(query && key && value && attention_out);
  key_items[0] = key;
  value_items[0] = value;
  keys = aclCreateTensorList(key_items, 1);
  values = aclCreateTensorList(value_items, 1);
  CHECK(keys && values);

  /* FIA V1 decode: every score equal, so the output is V's value. */
  CHECK(aclnnFusedInferAttentionScoreGetWorkspaceSize(query, keys, values, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                                      NULL, NULL, NULL, NULL, NULL, NULL, NULL, N, 0.125, 2147483647,
                                                      2147483647, layout, 0, 0, 0, 0, 0, false, attention_out, NULL,
                                                      &workspace_size, &executor) == ACLNN_SUCCESS);
  {
    void *workspace = NULL;
    if (workspace_size > 0) CHECK(aclrtMalloc(&workspace, workspace_size, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS);
    CHECK(aclnnFusedInferAttentionScore(workspace, workspace_size, executor, NULL) == ACLNN_SUCCESS);
    if (workspace != NULL) aclrtFree(workspace);
  }
  CHECK(all_equal(out, B * N * D, 3.0f));

  /* A null query: 161001, and the message names it. */
  CHECK(aclnnIncreFlashAttentionGetWorkspaceSize(NULL, keys, values, NULL, NULL, NULL, N, 1.0, layout, 0, attention_out,
                                                 &workspace_size, &executor) == ACLNN_ERR_PARAM_NULLPTR);
  CHECK(strstr(aclGetRecentErrMsg(), "aclnnIncreFlashAttentionGetWorkspaceSize: query") != NULL);

  /* PFA V1 prefill over S query rows, single-tensor key and value. */
  aclDestroyTensor(query);
  aclDestroyTensor(attention_out);
  query = bnsd(q, S);
  attention_out = bnsd(out, S);
  CHECK(aclnnPromptFlashAttentionGetWorkspaceSize(query, key, value, NULL, NULL, NULL, N, 0.125, 2147483647, 2147483647,
                                                  layout, 0, attention_out, &workspace_size,
                                                  &executor) == ACLNN_SUCCESS);
  {
    static unsigned char workspace[1 << 16];
    CHECK(workspace_size <= sizeof workspace);
    CHECK(aclnnPromptFlashAttention(workspace, workspace_size, executor, NULL) == ACLNN_SUCCESS);
  }
  CHECK(all_equal(out, B * N * S * D, 3.0f));

  CHECK(aclDestroyTensorList(keys) == ACLNN_SUCCESS);
  CHECK(aclDestroyTensorList(values) == ACLNN_SUCCESS);
  aclDestroyTensor(query);
  aclDestroyTensor(key);
  aclDestroyTensor(value);
  aclDestroyTensor(attention_out);
  CHECK(aclDestroyTensor(NULL) == ACLNN_SUCCESS);
  CHECK(aclFinalize() == ACL_SUCCESS);
  printf("ok\n");
  return 0;
}
