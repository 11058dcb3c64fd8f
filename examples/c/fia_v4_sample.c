/* aclnnFusedInferAttentionScoreV4 as the CANN documentation sample calls it (FIA-SPEC 22.16):
 * BNSD, B = 1, Q_N = 2, KV_N = 1, Q_S = 1, KV_S = 16, D = 128, every input an fp16 one,
 * scaleValue = 1/sqrt(128), no mask. Every score is equal, so the output is the mean of the V
 * rows: all ones, shape (1, 2, 1, 128). Exits 0 when it is. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "aclnnop/aclnn_fused_infer_attention_score_v4.h"
#include "sample_util.h"

enum { B = 1, QN = 2, KVN = 1, QS = 1, KVS = 16, D = 128 };

int main(void) {
  aclrtStream stream = NULL;
  static aclFloat16 qHost[B * QN * QS * D], kvHost[B * KVN * KVS * D], outHost[B * QN * QS * D];
  const int64_t qShape[4] = {B, QN, QS, D}, kvShape[4] = {B, KVN, KVS, D};
  void *qDev = NULL, *kDev = NULL, *vDev = NULL, *outDev = NULL, *workspace = NULL;
  aclTensor *query = NULL, *key = NULL, *value = NULL, *out = NULL;
  aclTensorList *keyList, *valueList;
  uint64_t workspaceSize = 0;
  aclOpExecutor *executor = NULL;
  char layout[] = "BNSD";
  int i, wrong = 0;

  CHECK_RET(Init(0, &stream) == 0, "Init");
  for (i = 0; i < B * QN * QS * D; ++i) qHost[i] = aclFloatToFloat16(1.0f);
  for (i = 0; i < B * KVN * KVS * D; ++i) kvHost[i] = aclFloatToFloat16(1.0f);
  CHECK_RET(CreateAclTensor(qHost, sizeof qHost, qShape, 4, ACL_FLOAT16, &qDev, &query) == 0, "query");
  CHECK_RET(CreateAclTensor(kvHost, sizeof kvHost, kvShape, 4, ACL_FLOAT16, &kDev, &key) == 0, "key");
  CHECK_RET(CreateAclTensor(kvHost, sizeof kvHost, kvShape, 4, ACL_FLOAT16, &vDev, &value) == 0, "value");
  CHECK_RET(CreateAclTensor(NULL, sizeof outHost, qShape, 4, ACL_FLOAT16, &outDev, &out) == 0, "attentionOut");
  keyList = aclCreateTensorList((const aclTensor *const *)&key, 1);
  valueList = aclCreateTensorList((const aclTensor *const *)&value, 1);
  CHECK_RET(keyList != NULL && valueList != NULL, "aclCreateTensorList");

  /* The 26 optional inputs are absent; softmaxLseFlag false, so softmaxLse is NULL too. */
  CHECK_RET(aclnnFusedInferAttentionScoreV4GetWorkspaceSize(
                query, keyList, valueList, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, QN, 1.0 / sqrt((double)D),
                2147483647, 2147483647, layout, KVN, 0, 0, 0, 0, false, 0, 0, 0, out, NULL, &workspaceSize,
                &executor) == ACLNN_SUCCESS,
            "aclnnFusedInferAttentionScoreV4GetWorkspaceSize");
  if (workspaceSize > 0) {
    CHECK_RET(aclrtMalloc(&workspace, workspaceSize, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS, "aclrtMalloc");
  }
  CHECK_RET(aclnnFusedInferAttentionScoreV4(workspace, workspaceSize, executor, stream) == ACLNN_SUCCESS,
            "aclnnFusedInferAttentionScoreV4");
  CHECK_RET(aclrtSynchronizeStream(stream) == ACL_SUCCESS, "aclrtSynchronizeStream");
  CHECK_RET(aclrtMemcpy(outHost, sizeof outHost, outDev, sizeof outHost, ACL_MEMCPY_DEVICE_TO_HOST) == ACL_SUCCESS,
            "aclrtMemcpy");
  for (i = 0; i < B * QN * QS * D; ++i) wrong += aclFloat16ToFloat(outHost[i]) != 1.0f;
  printf("attentionOut (1, 2, 1, 128): %d of %d elements differ from 1\n", wrong, B * QN * QS * D);

  aclDestroyTensorList(keyList);
  aclDestroyTensorList(valueList);
  aclDestroyTensor(query);
  aclDestroyTensor(key);
  aclDestroyTensor(value);
  aclDestroyTensor(out);
  aclrtFree(qDev);
  aclrtFree(kDev);
  aclrtFree(vDev);
  aclrtFree(outDev);
  if (workspace != NULL) aclrtFree(workspace);
  aclrtDestroyStream(stream);
  aclrtResetDevice(0);
  aclFinalize();
  return wrong == 0 ? 0 : 1;
}
