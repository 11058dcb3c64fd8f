# find_package(fia): the fia library (static) and its private dependencies.
include(CMakeFindDependencyMacro)
find_dependency(hwy)
find_dependency(TBB)
include("${CMAKE_CURRENT_LIST_DIR}/fiaTargets.cmake")
