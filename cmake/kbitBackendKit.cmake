# kbit_link_backend(<target> MAP_DIR <dir> INTERFACES <core 4bit ...>): links a backend shared object
# the way abi/ABI.md requires (hidden visibility, the version script <dir>/kbit_<iface>.map of every
# interface it implements, -Bsymbolic so internal calls never leave the object, no undefined symbols).
# Used by kbit's own backends (cmake/KbitBackend.cmake) and, installed beside kbitConfig.cmake, by
# kbit_add_vendor_backend() of an installed kbit.
function(kbit_link_backend target)
  cmake_parse_arguments(ARG "" "MAP_DIR" "INTERFACES" ${ARGN})
  set_target_properties(${target} PROPERTIES
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    CUDA_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  target_compile_definitions(${target} PRIVATE KBIT_BUILDING)
  set(maps "")
  foreach(iface IN LISTS ARG_INTERFACES)
    set(map "${ARG_MAP_DIR}/kbit_${iface}.map")
    target_link_options(${target} PRIVATE "LINKER:--version-script=${map}")
    list(APPEND maps "${map}")
  endforeach()
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${maps})
  target_link_options(${target} PRIVATE "LINKER:-Bsymbolic" "LINKER:--no-undefined")
endfunction()
