# Reads the release version and every interface version from the public headers (the only place
# they are written), like zstd's GetZstdLibraryVersion.cmake.
function(kbit_read_define header macro out_var)
  file(STRINGS "${header}" line REGEX "^#define ${macro} ")
  if(NOT line)
    message(FATAL_ERROR "${macro} not found in ${header}")
  endif()
  string(REGEX REPLACE "^#define ${macro} +\"?([^\" ]+)\"?.*$" "\\1" value "${line}")
  set(${out_var} "${value}" PARENT_SCOPE)
endfunction()

set(_inc "${CMAKE_CURRENT_LIST_DIR}/../include/kbit")
kbit_read_define("${_inc}/kbit_core.h" KBIT_RELEASE_VERSION_STRING KBIT_RELEASE_VERSION)
include("${CMAKE_CURRENT_LIST_DIR}/KbitInterfaces.cmake")
foreach(lower IN LISTS KBIT_INTERFACES)
  string(TOUPPER "${lower}" iface)
  kbit_read_define("${_inc}/kbit_${lower}.h" KBIT_${iface}_VERSION_MAJOR KBIT_${iface}_VERSION_MAJOR)
  kbit_read_define("${_inc}/kbit_${lower}.h" KBIT_${iface}_VERSION_MINOR KBIT_${iface}_VERSION_MINOR)
endforeach()
