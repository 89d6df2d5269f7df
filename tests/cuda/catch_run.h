// catch_run.h — runs the Catch2 session of a CUDA test program (catch_impl.cpp): argv[0] is taken as
// the program name, the rest as Catch2's command line.
#pragma once

int run_catch(int argc, char** argv);
