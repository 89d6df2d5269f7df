# kbit_add_backend(<target> NAME <name> INTERFACES <core 4bit 8bit optim8 ...> SOURCES ...)
# Builds libkbit_<name>.so the way abi/ABI.md requires: hidden visibility, the version scripts of
# the implemented interfaces from abi/generated/, -Bsymbolic (internal calls never leave the object), no
# undefined symbols, and a ctest that checks the exported symbols against abi/.
# kbit_export_sources(<variable> <interfaces...>): the generated exported functions of those backend
# interfaces (src/common/generated/kbit_<iface>_exports.cpp, from abi/kbit_<iface>.def), for a backend's
# sources: the interfaces of abi/interfaces.def and the CPU backend's bnb_cpu.
function(kbit_export_sources var)
  set(files "")
  foreach(iface IN LISTS ARGN)
    if(iface IN_LIST KBIT_INTERFACES OR iface STREQUAL "bnb_cpu")
      list(APPEND files "${PROJECT_SOURCE_DIR}/src/common/generated/kbit_${iface}_exports.cpp")
    endif()
  endforeach()
  set(${var} ${files} PARENT_SCOPE)
endfunction()

include("${CMAKE_CURRENT_LIST_DIR}/kbitBackendKit.cmake")  # kbit_link_backend()

function(kbit_add_backend target)
  cmake_parse_arguments(ARG "" "NAME" "INTERFACES;SOURCES" ${ARGN})
  add_library(${target} SHARED ${ARG_SOURCES})
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME "kbit_${ARG_NAME}"
    LIBRARY_OUTPUT_DIRECTORY "${KBIT_BACKEND_OUTPUT_DIR}")
  target_link_libraries(${target} PRIVATE kbit_common)
  kbit_link_backend(${target} MAP_DIR "${KBIT_ABI_GENERATED_DIR}" INTERFACES ${ARG_INTERFACES})
  # Installed beside libkbit.so by cmake/KbitInstall.cmake, exported as kbit::kbit_<name>.
  set_property(GLOBAL APPEND PROPERTY KBIT_BACKEND_TARGETS ${target})
  if(KBIT_BUILD_TESTS)
    add_test(NAME abi.exports.${ARG_NAME}
             COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tests/abi/check_exports.py
                     $<TARGET_FILE:${target}> ${ARG_INTERFACES})
  endif()
endfunction()
