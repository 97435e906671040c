#pragma once
/// Settings made from Python (mccl.init(), mccl.MCCLConfig) and the one mccl
/// runtime of the process. Python values are explicit overrides: they beat
/// the MCCL_* environment, exactly like C++ config_overrides.

#include <mccl/communicator.hpp>

#include <memory>
#include <string>

namespace mccl::torch_backend {

/// Validates `value` for the setting `name` (an MCCL_* name) right away, so
/// a bad value fails at mccl.init() naming it, then records it.
void set_python_setting(const std::string& name, const std::string& value);

/// Forgets every value set from Python (the environment applies again).
void clear_python_settings();

/// The values set from Python so far.
config_overrides python_settings();

/// The configuration communicators created now would get (defaults <
/// environment < Python), validated.
config resolved_settings();

/// The process's runtime, started on first use with the Python settings.
/// Process groups hold a reference, so it outlives every communicator.
std::shared_ptr<runtime> shared_runtime();

/// Drops the process's reference (at interpreter exit); the runtime stops
/// once the last process group using it is gone.
void release_runtime();

} // namespace mccl::torch_backend
