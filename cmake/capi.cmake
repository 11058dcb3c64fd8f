# The CANN-compatible C API (headers in capi/include, code in src/capi; docs/c-api.md):
#   fia_capi     its objects, linked into the tests (with the static fia of the C++ test support);
#   fia_shared   libfia.so: fia + the C API, exporting only acl*/aclnn* and fia:: (capi/libfia.map),
#                with libascendcl.so, libopapi.so and libnnopbase.so as links to it so that a CANN
#                build line (-lascendcl -lopapi -lnnopbase) links; exported as fia::cann.
add_library(fia_capi OBJECT
  src/capi/errors.cpp
  src/capi/handles.cpp
  src/capi/executor.cpp
  src/capi/runtime.cpp
  src/capi/fia_ops.cpp
  src/capi/ifa_ops.cpp
  src/capi/pfa_ops.cpp
)
target_include_directories(fia_capi PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/capi/include> PRIVATE src)
target_link_libraries(fia_capi PUBLIC fia)
set_target_properties(fia_capi PROPERTIES POSITION_INDEPENDENT_CODE ON CXX_VISIBILITY_PRESET hidden
                                          VISIBILITY_INLINES_HIDDEN ON)

set(fia_cann_map ${PROJECT_SOURCE_DIR}/capi/libfia.map)
add_library(fia_shared SHARED $<TARGET_OBJECTS:fia_capi>)
target_include_directories(fia_shared PRIVATE src
  PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/capi/include> $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
         $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/fia/cann> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_link_libraries(fia_shared PRIVATE -Wl,--whole-archive fia -Wl,--no-whole-archive
                                         hwy::hwy hwy::hwy_contrib TBB::tbb)
target_link_options(fia_shared PRIVATE -Wl,--version-script=${fia_cann_map} -Wl,--no-undefined)
set_target_properties(fia_shared PROPERTIES OUTPUT_NAME fia EXPORT_NAME cann LINK_DEPENDS ${fia_cann_map}
                                            CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
add_library(fia::cann ALIAS fia_shared)
set(fia_cann_links libascendcl.so libopapi.so libnnopbase.so)
foreach(link IN LISTS fia_cann_links)
  add_custom_command(TARGET fia_shared POST_BUILD
                     COMMAND ${CMAKE_COMMAND} -E create_symlink $<TARGET_FILE_NAME:fia_shared> ${link}
                     WORKING_DIRECTORY $<TARGET_FILE_DIR:fia_shared>)
  list(APPEND fia_cann_link_files $<TARGET_FILE_DIR:fia_shared>/${link})
endforeach()

install(TARGETS fia_shared EXPORT fiaTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${fia_cann_link_files} DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY capi/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/fia/cann)
# The .pc files are relocatable: their prefix is found from where they are (pcfiledir).
file(RELATIVE_PATH fia_pc_up "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
string(REGEX REPLACE "/$" "" fia_pc_up "${fia_pc_up}")
configure_file(cmake/fia.pc.in fia.pc @ONLY)
configure_file(cmake/fia-cann.pc.in fia-cann.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/fia.pc ${PROJECT_BINARY_DIR}/fia-cann.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The C examples (examples/c), written the CANN-sample way (run as tests by tests/CMakeLists.txt).
set(FIA_C_EXAMPLES fia_v4_sample fia_v4_paged_decode ifa_v4_decode pfa_v3_causal_prefill)
foreach(example IN LISTS FIA_C_EXAMPLES)
  add_executable(example_c_${example} examples/c/${example}.c)
  target_link_libraries(example_c_${example} PRIVATE fia_shared m)
  set_target_properties(example_c_${example} PROPERTIES C_STANDARD 99 C_EXTENSIONS OFF)
endforeach()
