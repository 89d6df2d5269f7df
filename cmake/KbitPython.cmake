# The Python package's share of the install (component "python", what `pip install .` installs through
# scikit-build-core into the wheel, next to python/kbit): libkbit.so with every backend beside it in
# kbit/_lib (the loader searches its own directory) and libkbit_io.so, the kbit command in kbit/_bin
# (run by the console script `kbit`, kbit/_cli.py), the ABI function lists (kbit/abi, read by
# kbit/_abidef.py: the package derives its ctypes/cffi signatures from them at import), and the
# headers.
option(KBIT_PYTHON_PACKAGE "Install the Python package's libraries and ABI files (component python)" OFF)
if(KBIT_PYTHON_PACKAGE)
  get_property(_kbit_py_backends GLOBAL PROPERTY KBIT_BACKEND_TARGETS)
  install(TARGETS kbit ${_kbit_py_backends} LIBRARY DESTINATION kbit/_lib COMPONENT python)
  if(TARGET kbit_io)
    install(TARGETS kbit_io LIBRARY DESTINATION kbit/_lib COMPONENT python)
  endif()
  if(TARGET kbit_cli)
    install(TARGETS kbit_cli RUNTIME DESTINATION kbit/_bin COMPONENT python)  # finds kbit/_lib: INSTALL_RPATH
  endif()
  file(GLOB _kbit_py_defs "${KBIT_ABI_DIR}/*.def")
  install(FILES ${_kbit_py_defs} DESTINATION kbit/abi COMPONENT python)
  install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/kbit" DESTINATION kbit/include COMPONENT python
          FILES_MATCHING PATTERN "*.h")
endif()
