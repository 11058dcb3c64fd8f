/* aclnnPromptFlashAttentionV3: a causal prefill of 5 tokens, BSH, 2 heads of dim 16, fp16.
 * Causality is sparseMode 3 with FIA's fixed (2048, 2048) "compressed" bool mask (1 above the
 * diagonal; FIA-SPEC 6.2), whatever the sequence length. Row 0 sees only key 0, so its output is
 * value row 0 exactly; the program checks that, and that later rows are finite. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "aclnnop/aclnn_prompt_flash_attention_v3.h"
#include "sample_util.h"

enum { B = 1, N = 2, S = 5, D = 16, MASK = 2048 };

int main(void) {
  aclrtStream stream = NULL;
  static aclFloat16 qHost[B * S * N * D], kHost[B * S * N * D], vHost[B * S * N * D], outHost[B * S * N * D];
  bool *maskHost = malloc((size_t)MASK * MASK);
  const int64_t shape[3] = {B, S, N * D}, maskShape[2] = {MASK, MASK};
  void *qDev, *kDev, *vDev, *maskDev, *outDev, *workspace = NULL;
  aclTensor *query, *key, *value, *mask, *out;
  uint64_t workspaceSize = 0;
  aclOpExecutor *executor = NULL;
  char layout[] = "BSH";
  int i, j, wrong = 0;

  CHECK_RET(maskHost != NULL, "malloc");
  CHECK_RET(Init(0, &stream) == 0, "Init");
  for (i = 0; i < B * S * N * D; ++i) {
    qHost[i] = aclFloatToFloat16(0.01f * (float)(i % 37));
    kHost[i] = aclFloatToFloat16(0.02f * (float)(i % 23) - 0.2f);
    vHost[i] = aclFloatToFloat16((float)(i % 11) - 5.0f);
  }
  for (i = 0; i < MASK; ++i)
    for (j = 0; j < MASK; ++j) maskHost[(size_t)i * MASK + j] = j > i;
  CHECK_RET(CreateAclTensor(qHost, sizeof qHost, shape, 3, ACL_FLOAT16, &qDev, &query) == 0, "query");
  CHECK_RET(CreateAclTensor(kHost, sizeof kHost, shape, 3, ACL_FLOAT16, &kDev, &key) == 0, "key");
  CHECK_RET(CreateAclTensor(vHost, sizeof vHost, shape, 3, ACL_FLOAT16, &vDev, &value) == 0, "value");
  CHECK_RET(CreateAclTensor(maskHost, (size_t)MASK * MASK, maskShape, 2, ACL_BOOL, &maskDev, &mask) == 0, "attenMask");
  CHECK_RET(CreateAclTensor(NULL, sizeof outHost, shape, 3, ACL_FLOAT16, &outDev, &out) == 0, "attentionOut");

  CHECK_RET(aclnnPromptFlashAttentionV3GetWorkspaceSize(query, key, value, NULL, mask, NULL, NULL, NULL, NULL, NULL,
                                                        NULL, NULL, N, 1.0 / sqrt((double)D), 2147483647, 0, layout,
                                                        N, 3, 1, out, &workspaceSize, &executor) == ACLNN_SUCCESS,
            "aclnnPromptFlashAttentionV3GetWorkspaceSize");
  if (workspaceSize > 0) {
    CHECK_RET(aclrtMalloc(&workspace, workspaceSize, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS, "aclrtMalloc");
  }
  CHECK_RET(aclnnPromptFlashAttentionV3(workspace, workspaceSize, executor, stream) == ACLNN_SUCCESS,
            "aclnnPromptFlashAttentionV3");
  CHECK_RET(aclrtSynchronizeStream(stream) == ACL_SUCCESS, "aclrtSynchronizeStream");
  CHECK_RET(aclrtMemcpy(outHost, sizeof outHost, outDev, sizeof outHost, ACL_MEMCPY_DEVICE_TO_HOST) == ACL_SUCCESS,
            "aclrtMemcpy");
  for (i = 0; i < N * D; ++i) wrong += outHost[i] != vHost[i];                       /* row 0 = V row 0 */
  for (i = N * D; i < B * S * N * D; ++i) wrong += !isfinite(aclFloat16ToFloat(outHost[i]));
  printf("PFA V3 causal prefill: row 0 = %.2f %.2f ..., row 4 = %.3f ...; %d elements wrong\n",
         aclFloat16ToFloat(outHost[0]), aclFloat16ToFloat(outHost[1]), aclFloat16ToFloat(outHost[4 * N * D]), wrong);

  aclDestroyTensor(query);
  aclDestroyTensor(key);
  aclDestroyTensor(value);
  aclDestroyTensor(mask);
  aclDestroyTensor(out);
  aclrtFree(qDev);
  aclrtFree(kDev);
  aclrtFree(vDev);
  aclrtFree(maskDev);
  aclrtFree(outDev);
  if (workspace != NULL) aclrtFree(workspace);
  free(maskHost);
  aclrtDestroyStream(stream);
  aclrtResetDevice(0);
  aclFinalize();
  return wrong == 0 ? 0 : 1;
}
