# The Python package (python/fia, docs/python.md): the nanobind extension fia._C, built
#   - by `pip install .` (scikit-build-core, pyproject.toml), which installs it and the package's
#     .py files (component "python"); and
#   - in a plain CMake build when Python (3.9+) and nanobind are found (FIA_PYTHON=AUTO) or
#     required (ON): then build/python/fia is the importable package the Python tests run on.
set(FIA_PYTHON AUTO CACHE STRING "Build the Python extension fia._C: AUTO (when Python and nanobind are found), ON or OFF")
set_property(CACHE FIA_PYTHON PROPERTY STRINGS AUTO ON OFF)
if(FIA_PYTHON STREQUAL "OFF")
  return()
endif()

find_package(Python 3.9 COMPONENTS Interpreter Development.Module)
if(Python_FOUND AND NOT nanobind_DIR)
  execute_process(COMMAND ${Python_EXECUTABLE} -m nanobind --cmake_dir OUTPUT_VARIABLE fia_nanobind_dir
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(fia_nanobind_dir)
    set(nanobind_DIR ${fia_nanobind_dir} CACHE PATH "nanobind's CMake package")
  endif()
endif()
if(Python_FOUND)
  find_package(nanobind CONFIG QUIET)
endif()
if(NOT nanobind_FOUND)
  if(FIA_PYTHON STREQUAL "ON")
    message(FATAL_ERROR "FIA_PYTHON=ON needs Python 3.9+ with its development files and nanobind (pip install nanobind)")
  endif()
  message(STATUS "fia: Python extension not built (Python 3.9+ and nanobind not found; pip install nanobind)")
  return()
endif()

nanobind_add_module(fia_python NB_STATIC src/python/module.cpp)
target_include_directories(fia_python PRIVATE src)
target_link_libraries(fia_python PRIVATE fia)
set(fia_python_dir ${PROJECT_BINARY_DIR}/python/fia)
set_target_properties(fia_python PROPERTIES OUTPUT_NAME _C LIBRARY_OUTPUT_DIRECTORY ${fia_python_dir})

# The package's .py/.pyi files beside the extension, so that build/python is importable.
file(GLOB fia_python_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/python/fia/*.py
     ${PROJECT_SOURCE_DIR}/python/fia/*.pyi ${PROJECT_SOURCE_DIR}/python/fia/py.typed)
set(fia_python_copies)
foreach(source IN LISTS fia_python_sources)
  get_filename_component(name ${source} NAME)
  add_custom_command(OUTPUT ${fia_python_dir}/${name} COMMAND ${CMAKE_COMMAND} -E copy ${source} ${fia_python_dir}/${name}
                     DEPENDS ${source})
  list(APPEND fia_python_copies ${fia_python_dir}/${name})
endforeach()
add_custom_target(fia_python_files ALL DEPENDS ${fia_python_copies})
add_dependencies(fia_python fia_python_files)

install(TARGETS fia_python LIBRARY DESTINATION fia COMPONENT python)
