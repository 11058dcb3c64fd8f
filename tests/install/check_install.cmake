# ctest install_consumer: `cmake --install` the build into a temporary prefix, then configure,
# build and run tests/install/consumer against it with find_package(fia).
# Arguments (-D): BUILD_DIR, CONSUMER_DIR, WORK_DIR, GENERATOR, CXX_COMPILER, LINK_FLAGS.
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
     "-DCMAKE_EXE_LINKER_FLAGS=${LINK_FLAGS}")
step("building the consumer" "${CMAKE_COMMAND}" --build "${WORK_DIR}/build")
step("running the consumer" "${WORK_DIR}/build/consumer" "${WORK_DIR}/case")
file(REMOVE_RECURSE "${WORK_DIR}")
