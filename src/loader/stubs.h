// stubs.h — loader stubs for functions a backend lacks.
//
// A stub must name the function and the backend ("cquantize_blockwise_fp32_nf4: not implemented by
// backend cpu (/usr/lib/libkbit_cpu.so)"), but a C function pointer carries no data. So each stub is
// a template instance per (function, slot): a slot is the identity of one loaded backend file (name,
// path, interface versions), held while any handle of that file is open. There are kSlots slots for
// backends plus two for the trampolines' stand-ins: "no backend", and "not chosen yet" (a backend's
// probe, constructor or destructor calling back into libkbit.so while the loader runs it). These
// registries (the slots and the string guards below), guarded by a mutex, are the only loader state
// besides the default backend; they never change what any call does.
#pragma once

#include <string>

struct kbit_backend;

namespace kbit::loader {

constexpr int kSlots = 16;

// Replaces every NULL member of the backend's tables with a stub of its slot (acquired here if the
// backend has none yet), and routes its core kbit_last_error_message through the slot so that stub
// failures are reported too. False (with *error) when all slots are taken.
bool install_stubs(kbit_backend& backend, std::string* error);

// Gives a backend's slot back (no-op for -1 and the null slot).
void release_slot(int slot);

// The slot of the "no backend" stand-in, with the reason its stubs report.
int null_slot(const std::string& reason);

// The slot of the re-entry stand-in: its stubs return KBIT_STATUS_NOT_SUPPORTED and say why.
int reentry_slot();

// kbit_backend_name, _info, _status_string and kbit_last_error_message must never return NULL,
// whatever the vendor does, so every usable backend's table holds guards for them: instances per
// guard identity (like the slots, shared by the handles of one file) that substitute a fixed string.
constexpr int kGuards = 64;

// Wraps the four string functions of the backend's (finalized) core table. False (with *error) when
// kGuards other backend files are open.
bool install_guards(kbit_backend& backend, std::string* error);

// Gives a backend's guard identity back (no-op for -1).
void release_guard(int guard);

}  // namespace kbit::loader
