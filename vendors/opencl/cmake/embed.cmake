# cmake -DIN=<file.cl> -DOUT=<file.cpp> -DNAME=<stem> -P embed.cmake: writes the OpenCL C source as a
# C++ string constant kbit::opencl::source_<stem> (raw string: the text stays readable in the output).
file(READ "${IN}" text)
file(WRITE "${OUT}" "// Generated from ${IN} by cmake/embed.cmake; do not edit.\n"
                    "namespace kbit::opencl {\nextern const char source_${NAME}[] = R\"KBIT_CL(${text})KBIT_CL\";\n}\n")
