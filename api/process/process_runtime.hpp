#pragma once
/// The process-wide state that language bindings share: settings made
/// explicitly by the program (mccl.init() in Python, mccl_set_setting() in
/// C) and the process's one runtime. The C API and the torch backend both
/// use it, so a Python program that mixes mccl.distributed with
/// torch.distributed runs one actor system with one set of settings.

#include <mccl/communicator.hpp>

#include <memory>
#include <string>

namespace mccl::process {

/// Validates `value` for the setting `name` (an MCCL_* name) right away, so
/// a bad value fails where it is set, naming it; then records it. Recorded
/// values beat the MCCL_* environment, like C++ config_overrides.
void set_setting(const std::string& name, const std::string& value);

/// Forgets every value set so far (the environment applies again).
void clear_settings();

/// The values set so far.
config_overrides explicit_settings();

/// The configuration communicators created now would get (defaults <
/// environment < explicit settings), validated.
config resolved_settings();

/// The process's runtime: the one already running, else a new one started
/// with the explicit settings. The process keeps no reference of its own:
/// the runtime stops when the last holder lets go.
std::shared_ptr<runtime> shared_runtime();

} // namespace mccl::process
