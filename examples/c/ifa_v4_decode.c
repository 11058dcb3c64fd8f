/* aclnnIncreFlashAttentionV4 in the shape of CANN's IFA sample: BNSD, query (1, 2, 1, 16),
 * key/value (1, 2, 2, 16), an int8 mask (1, 1, 1, 2) hiding nothing, actualSeqLengths {2}.
 * Both key rows are equal, so each head's output is the mean of its two value rows; the program
 * checks that. */
#include <math.h>
#include <stdio.h>

#include "aclnnop/aclnn_incre_flash_attention_v4.h"
#include "sample_util.h"

enum { B = 1, N = 2, S = 2, D = 16 };

int main(void) {
  aclrtStream stream = NULL;
  static aclFloat16 qHost[B * N * D], kHost[B * N * S * D], vHost[B * N * S * D], outHost[B * N * D];
  static int8_t maskHost[B * S];
  const int64_t qShape[4] = {B, N, 1, D}, kvShape[4] = {B, N, S, D}, maskShape[4] = {B, 1, 1, S};
  const int64_t seqLens[B] = {S};
  void *qDev, *kDev, *vDev, *maskDev, *outDev, *workspace = NULL;
  aclTensor *query, *key, *value, *mask, *out;
  aclTensorList *keyList, *valueList;
  aclIntArray *actualSeqLengths;
  uint64_t workspaceSize = 0;
  aclOpExecutor *executor = NULL;
  char layout[] = "BNSD";
  int n, s, d, wrong = 0;

  CHECK_RET(Init(0, &stream) == 0, "Init");
  for (n = 0; n < N; ++n)
    for (d = 0; d < D; ++d) {
      qHost[n * D + d] = aclFloatToFloat16(0.1f * (float)(d - n));
      for (s = 0; s < S; ++s) {
        kHost[(n * S + s) * D + d] = aclFloatToFloat16(0.05f * (float)d);
        vHost[(n * S + s) * D + d] = aclFloatToFloat16((float)(s * 4 + n) + 0.25f * (float)d);
      }
    }
  CHECK_RET(CreateAclTensor(qHost, sizeof qHost, qShape, 4, ACL_FLOAT16, &qDev, &query) == 0, "query");
  CHECK_RET(CreateAclTensor(kHost, sizeof kHost, kvShape, 4, ACL_FLOAT16, &kDev, &key) == 0, "key");
  CHECK_RET(CreateAclTensor(vHost, sizeof vHost, kvShape, 4, ACL_FLOAT16, &vDev, &value) == 0, "value");
  CHECK_RET(CreateAclTensor(maskHost, sizeof maskHost, maskShape, 4, ACL_INT8, &maskDev, &mask) == 0, "attenMask");
  CHECK_RET(CreateAclTensor(NULL, sizeof outHost, qShape, 4, ACL_FLOAT16, &outDev, &out) == 0, "attentionOut");
  keyList = aclCreateTensorList((const aclTensor *const *)&key, 1);
  valueList = aclCreateTensorList((const aclTensor *const *)&value, 1);
  actualSeqLengths = aclCreateIntArray(seqLens, B);
  CHECK_RET(keyList != NULL && valueList != NULL && actualSeqLengths != NULL, "handles");

  CHECK_RET(aclnnIncreFlashAttentionV4GetWorkspaceSize(query, keyList, valueList, NULL, mask, actualSeqLengths, NULL,
                                                       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, N,
                                                       1.0 / sqrt((double)D), layout, N, 0, 1, out, &workspaceSize,
                                                       &executor) == ACLNN_SUCCESS,
            "aclnnIncreFlashAttentionV4GetWorkspaceSize");
  if (workspaceSize > 0) {
    CHECK_RET(aclrtMalloc(&workspace, workspaceSize, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS, "aclrtMalloc");
  }
  CHECK_RET(aclnnIncreFlashAttentionV4(workspace, workspaceSize, executor, stream) == ACLNN_SUCCESS,
            "aclnnIncreFlashAttentionV4");
  CHECK_RET(aclrtSynchronizeStream(stream) == ACL_SUCCESS, "aclrtSynchronizeStream");
  CHECK_RET(aclrtMemcpy(outHost, sizeof outHost, outDev, sizeof outHost, ACL_MEMCPY_DEVICE_TO_HOST) == ACL_SUCCESS,
            "aclrtMemcpy");
  for (n = 0; n < N; ++n)
    for (d = 0; d < D; ++d) {
      const float mean = 0.5f * (aclFloat16ToFloat(vHost[(n * S) * D + d]) + aclFloat16ToFloat(vHost[(n * S + 1) * D + d]));
      wrong += fabsf(aclFloat16ToFloat(outHost[n * D + d]) - mean) > 1e-2f;
    }
  printf("IFA V4: head 0 = %.3f %.3f ..., head 1 = %.3f ...; %d elements off the mean of V\n",
         aclFloat16ToFloat(outHost[0]), aclFloat16ToFloat(outHost[1]), aclFloat16ToFloat(outHost[D]), wrong);

  aclDestroyTensorList(keyList);
  aclDestroyTensorList(valueList);
  aclDestroyIntArray(actualSeqLengths);
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
  aclrtDestroyStream(stream);
  aclrtResetDevice(0);
  aclFinalize();
  return wrong == 0 ? 0 : 1;
}
