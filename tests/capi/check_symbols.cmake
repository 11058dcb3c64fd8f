# ctest capi_exported_symbols: libfia.so exports only the C API (acl*, aclnn*) and the fia:: C++
# API (`nm -D --defined-only`, demangled), and exports the entry points of every operator version.
# Argument (-D): LIBRARY.
cmake_minimum_required(VERSION 3.22)
execute_process(COMMAND nm -D --defined-only -C ${LIBRARY} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm failed (${rc}): ${err}")
endif()
string(REPLACE "\n" ";" lines "${out}")
set(names "")
foreach(line IN LISTS lines)
  if(line STREQUAL "")
    continue()
  endif()
  # "<address> <type> <name>"; the name may contain spaces (C++ signatures).
  string(REGEX REPLACE "^[0-9a-fA-F]* *[A-Za-z] " "" name "${line}")
  if(NOT name MATCHES "^(acl|fia::)")
    message(SEND_ERROR "exported symbol outside the API: ${line}")
  endif()
  list(APPEND names "${name}")
endforeach()
foreach(required aclnnFusedInferAttentionScoreV4GetWorkspaceSize aclnnFusedInferAttentionScore
                 aclnnIncreFlashAttentionV4 aclnnPromptFlashAttentionV3GetWorkspaceSize aclCreateTensor aclrtMalloc
                 aclGetRecentErrMsg)
  if(NOT required IN_LIST names)
    message(SEND_ERROR "libfia.so does not export ${required}")
  endif()
endforeach()
list(FILTER names INCLUDE REGEX "^fia::plan\\(")
if(names STREQUAL "")
  message(SEND_ERROR "libfia.so does not export fia::plan")
endif()
