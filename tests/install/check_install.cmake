# ctest install_consumer: `cmake --install` the build into a temporary prefix, then configure,
# build and run tests/install/consumer against it with find_package(fia).
# Then the C API: the consumer's C program on fia::cann, an aclnn sample linked with CANN's own
# link line (-lascendcl -lopapi -lnnopbase), a C++ program in CANN's sample style, and pkg-config's
# fia-cann.
# Arguments (-D): BUILD_DIR, CONSUMER_DIR, WORK_DIR, GENERATOR, CXX_COMPILER, C_COMPILER, LINK_FLAGS,
# LIBDIR (CMAKE_INSTALL_LIBDIR), C_SAMPLE (examples/c/fia_v4_sample.c), CXX_SAMPLE
# (tests/capi/cann_style_test.cpp, compiled against the installed headers only).
file(REMOVE_RECURSE "${WORK_DIR}")

function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}")
  endif()
endfunction()

step("cmake --install" "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${WORK_DIR}/prefix")
step("configuring the consumer" "${CMAKE_COMMAND}" -S "${CONSUMER_DIR}" -B "${WORK_DIR}/build" -G "${GENERATOR}"
     "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix" "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}"
     "-DCMAKE_C_COMPILER=${C_COMPILER}" "-DCMAKE_EXE_LINKER_FLAGS=${LINK_FLAGS}" "-DFIA_C_SAMPLE=${C_SAMPLE}")
step("building the consumer" "${CMAKE_COMMAND}" --build "${WORK_DIR}/build")
step("running the consumer" "${WORK_DIR}/build/consumer" "${WORK_DIR}/case")
step("running the C consumer on fia::cann" "${WORK_DIR}/build/consumer_c")
set(prefix "${WORK_DIR}/prefix")
separate_arguments(link_flags UNIX_COMMAND "${LINK_FLAGS}")
step("linking an aclnn sample with -lascendcl -lopapi -lnnopbase" "${C_COMPILER}" -std=c99
     "-I${prefix}/include/fia/cann" "${C_SAMPLE}" -o "${WORK_DIR}/cann_sample" "-L${prefix}/${LIBDIR}"
     -lascendcl -lopapi -lnnopbase -lm "-Wl,-rpath,${prefix}/${LIBDIR}" ${link_flags})
step("running the aclnn sample" "${WORK_DIR}/cann_sample")
step("linking a C++ sample in CANN's style (op::fp16_t, aclDataTypeSize)" "${CXX_COMPILER}" -std=c++17
     "-I${prefix}/include/fia/cann" "${CXX_SAMPLE}" -o "${WORK_DIR}/cann_style_sample" "-L${prefix}/${LIBDIR}"
     -lascendcl -lopapi -lnnopbase "-Wl,-rpath,${prefix}/${LIBDIR}" ${link_flags})
step("running the C++ sample" "${WORK_DIR}/cann_style_sample")
execute_process(COMMAND ${CMAKE_COMMAND} -E env "PKG_CONFIG_PATH=${prefix}/${LIBDIR}/pkgconfig"
                        pkg-config --cflags --libs fia-cann
                RESULT_VARIABLE rc OUTPUT_VARIABLE pc ERROR_VARIABLE pc)
string(REGEX MATCH "-I([^ \n]*)" include_flag "${pc}")
if(NOT rc EQUAL 0 OR NOT EXISTS "${CMAKE_MATCH_1}/aclnnop/aclnn_fused_infer_attention_score_v4.h" OR NOT pc MATCHES "-lfia")
  message(FATAL_ERROR "pkg-config fia-cann gave no include path with the headers, or no -lfia: ${pc}")
endif()
file(REMOVE_RECURSE "${WORK_DIR}")
