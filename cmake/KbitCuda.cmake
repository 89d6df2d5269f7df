# Decides whether the CUDA backend is built (KBIT_CUDA=ON|OFF|AUTO) and for which architectures.
#
# KBIT_CUDA=AUTO (default) builds libkbit_cuda.so when an nvcc is found, ON requires one, OFF skips it.
# KBIT_CUDA_ARCHS overrides the architectures, in CMake's CUDA_ARCHITECTURES syntax ("90" = sm_90
# machine code + compute_90 PTX, "90-real" = machine code only, "80-real;90" ...). The default list is
# written once, below: machine code for every architecture from sm_75 that the toolkit supports, plus
# PTX of the newest so that future GPUs can JIT-compile it.
set(KBIT_CUDA_ENABLED OFF)
set(KBIT_CUDA_ARCHS "" CACHE STRING
    "CUDA architectures of libkbit_cuda.so (CMake CUDA_ARCHITECTURES syntax); empty = kbit's default list")

string(TOUPPER "${KBIT_CUDA}" _kbit_cuda_mode)
if(_kbit_cuda_mode STREQUAL "OFF" OR _kbit_cuda_mode STREQUAL "FALSE" OR _kbit_cuda_mode STREQUAL "0")
  return()
endif()

include(CheckLanguage)
check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
  if(_kbit_cuda_mode STREQUAL "AUTO")
    message(STATUS "kbit: no CUDA compiler found, libkbit_cuda.so is not built (KBIT_CUDA=AUTO)")
    return()
  endif()
  message(FATAL_ERROR "kbit: KBIT_CUDA=${KBIT_CUDA} but no CUDA compiler (nvcc) was found")
endif()

enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)
set(KBIT_CUDA_ENABLED ON)

# The default architectures, the only place they are listed.
function(kbit_cuda_default_archs out_var)
  set(candidates 75 80 86 89 90)
  if(CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.8)
    list(APPEND candidates 100 120)
  endif()
  if(CMAKE_CUDA_COMPILER_VERSION VERSION_LESS 11.8)
    list(REMOVE_ITEM candidates 89 90)
  endif()
  list(POP_BACK candidates newest)
  set(archs "")
  foreach(a IN LISTS candidates)
    list(APPEND archs "${a}-real")
  endforeach()
  list(APPEND archs "${newest}")  # machine code and PTX
  set(${out_var} "${archs}" PARENT_SCOPE)
endfunction()

if(KBIT_CUDA_ARCHS)
  set(KBIT_CUDA_ARCH_LIST "${KBIT_CUDA_ARCHS}")
else()
  kbit_cuda_default_archs(KBIT_CUDA_ARCH_LIST)
endif()
set(CMAKE_CUDA_ARCHITECTURES "${KBIT_CUDA_ARCH_LIST}")  # every CUDA target of the project
message(STATUS "kbit: CUDA ${CMAKE_CUDA_COMPILER_VERSION}, libkbit_cuda.so for architectures ${KBIT_CUDA_ARCH_LIST}")

# For kbit_backend_probe()/info(): which device architectures the compiled code can run on.
# SASS of sm_XY runs on X.Z with Z >= Y; PTX of compute_XY is JIT-compiled for any X.Y or newer.
set(_sass "")
set(_ptx "")
foreach(a IN LISTS KBIT_CUDA_ARCH_LIST)
  string(REGEX MATCH "^[0-9]+" num "${a}")
  if(a MATCHES "-real$")
    list(APPEND _sass ${num})
  elseif(a MATCHES "-virtual$")
    list(APPEND _ptx ${num})
  else()
    list(APPEND _sass ${num})
    list(APPEND _ptx ${num})
  endif()
endforeach()
string(REPLACE ";" "," KBIT_CUDA_SASS_CSV "${_sass}")
string(REPLACE ";" "," KBIT_CUDA_PTX_CSV "${_ptx}")
