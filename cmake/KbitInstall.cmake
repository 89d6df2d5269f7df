# `cmake --install`: the public headers, libkbit.so with every backend beside it (the loader searches
# its own directory), the kbit command, the ABI lists and version scripts vendors build against
# (<datadir>/kbit/abi), the backend kit (kbit::backend_kit: the front end of kbit's own backends, for a
# vendor that implements kbit::ops instead of the exported functions; docs/vendor-backend.md), a CMake
# package (find_package(kbit): kbit::kbit = the loader, kbit::kbit_<name> = a backend, kbit::kbit_io =
# the checkpoint reader libkbit_io.so, variable kbit_ABI_DIR, kbit_add_vendor_backend()) and a
# pkg-config file (kbit.pc: -lkbit).
include(CMakePackageConfigHelpers)

set(KBIT_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/kbit")
set(KBIT_INSTALL_ABIDIR "${CMAKE_INSTALL_DATADIR}/kbit/abi")

install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/kbit" DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}"
        FILES_MATCHING PATTERN "*.h")
# The generated version scripts and symbol lists (abi/generated/ in the source tree) are installed
# beside the lists, so the installed directory stays flat.
file(GLOB _kbit_abi_files "${KBIT_ABI_DIR}/*.def" "${KBIT_ABI_GENERATED_DIR}/*.map"
                          "${KBIT_ABI_GENERATED_DIR}/*.symbols" "${KBIT_ABI_DIR}/ABI.md")
install(FILES ${_kbit_abi_files} DESTINATION "${KBIT_INSTALL_ABIDIR}")

# The backend kit: its headers under <includedir>/kbit/backend_kit (they include each other by bare
# name, so that directory is on kbit::backend_kit's include path), the generated exported functions of
# each backend interface under <datadir>/kbit/backend_kit, compiled into the vendor's library.
set(KBIT_INSTALL_KITDIR "${CMAKE_INSTALL_DATADIR}/kbit/backend_kit")
install(FILES ${KBIT_BACKEND_KIT_HEADERS} DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/kbit/backend_kit")
kbit_export_sources(_kbit_kit_sources ${KBIT_INTERFACES})
install(FILES ${_kbit_kit_sources} DESTINATION "${KBIT_INSTALL_KITDIR}")
install(TARGETS kbit_common EXPORT kbitTargets ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}")

get_property(_kbit_libraries GLOBAL PROPERTY KBIT_BACKEND_TARGETS)
if(TARGET kbit_io)
  list(PREPEND _kbit_libraries kbit_io)
endif()
if(TARGET kbit)
  list(PREPEND _kbit_libraries kbit)
endif()
foreach(target IN LISTS _kbit_libraries)
  target_include_directories(${target} INTERFACE "$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>")
endforeach()
install(TARGETS ${_kbit_libraries} EXPORT kbitTargets
        LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}")
if(TARGET kbit_cli)
  install(TARGETS kbit_cli RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}")
endif()

install(EXPORT kbitTargets NAMESPACE kbit:: DESTINATION "${KBIT_INSTALL_CMAKEDIR}")
configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/kbitConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/kbitConfig.cmake"
  INSTALL_DESTINATION "${KBIT_INSTALL_CMAKEDIR}"
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR KBIT_INSTALL_ABIDIR KBIT_INSTALL_KITDIR)
# 0.x releases: a minor may break the build-time API, so only the same minor is compatible.
write_basic_package_version_file("${PROJECT_BINARY_DIR}/kbitConfigVersion.cmake" COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/kbitConfig.cmake" "${PROJECT_BINARY_DIR}/kbitConfigVersion.cmake"
              "${PROJECT_SOURCE_DIR}/cmake/kbitBackendKit.cmake"
        DESTINATION "${KBIT_INSTALL_CMAKEDIR}")

# kbit.pc locates its prefix from its own place, so it stays right under `cmake --install --prefix`.
file(RELATIVE_PATH KBIT_PC_PREFIX "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
string(REGEX REPLACE "/$" "" KBIT_PC_PREFIX "${KBIT_PC_PREFIX}")
configure_file("${PROJECT_SOURCE_DIR}/cmake/kbit.pc.in" "${PROJECT_BINARY_DIR}/kbit.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/kbit.pc" DESTINATION "${CMAKE_INSTALL_LIBDIR}/pkgconfig")

if(KBIT_BUILD_TESTS AND TARGET kbit AND TARGET kbit_cpu)
  add_test(NAME install.consumer
           COMMAND bash "${PROJECT_SOURCE_DIR}/tests/install/test_install.sh" "${PROJECT_BINARY_DIR}"
                   "${PROJECT_SOURCE_DIR}" "${CMAKE_COMMAND}" "${CMAKE_C_COMPILER}" "${Python3_EXECUTABLE}")
  # It reads the whole build tree; let the other tests finish writing to it first.
  set_tests_properties(install.consumer PROPERTIES RUN_SERIAL ON)
endif()
