#pragma once
/// An mccl error on its way to Python through torch's C++.
///
/// A backend op's failure reaches Python along two roads. Work.wait(),
/// Future.value() and the backend's own calls are pybind11 functions: an
/// exception translator (module.cpp) turns it into the class of mccl.errors
/// for its code. Through DDP it travels as an exception_ptr in a future:
/// the reducer rethrows it inside backward(), the autograd engine carries
/// it to the caller's thread, and torch's HANDLE_TH_ERRORS raises it, which
/// makes any unknown std::exception a plain RuntimeError but raises a
/// torch::PyTorchError as the Python type that python_type() returns.
///
/// So the futures and Works of the backend fail with this error, a
/// torch::PyTorchError holding the mccl code and the mccl::error's what():
/// on both roads Python sees the same mccl.errors class (PeerLostError, ...)
/// with the same message as from a direct op. It holds no Python object,
/// so copying and destroying it (on any thread, in torch's C++) needs no GIL.

#include <mccl/error.hpp>

#include <torch/csrc/Exceptions.h>

#include <exception>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mccl::torch_backend {

class torch_visible_error : public torch::PyTorchError {
public:
  /// what() is `e.what()` ("mccl: peer_lost: ...").
  explicit torch_visible_error(const error& e);
  /// From an mccl.errors exception's code and str() (a comm hook's failure
  /// handed back to C++, hooks.py).
  torch_visible_error(errc code, std::string what);

  errc code() const noexcept { return code_; }

  /// The mccl.errors class for code() (mccl.MCCLError for an unknown code,
  /// RuntimeError if mccl.errors cannot be imported). Borrowed; needs the
  /// GIL, which every caller (torch's error handlers, our translator) holds.
  PyObject* python_type() override;

private:
  errc code_;
};

/// `failure` as the Works and futures carry it: an mccl::error becomes a
/// torch_visible_error; anything else is returned unchanged.
std::exception_ptr visible_to_python(std::exception_ptr failure);

/// The mccl error code of `failure` (an mccl::error or a
/// torch_visible_error), if it is one.
std::optional<errc> mccl_code_of(const std::exception_ptr& failure);

/// Remembers the text of a failed op's error, process-wide (the latest
/// 64: a failed Work's, or one raised to Python as it was issued), for
/// hooks.keep_mccl_errors: torch's Future.then keeps only the text of an
/// error raised in its callback.
void remember_failure(errc code, const std::string& what);

/// The remembered failures, oldest first: (code, what()).
std::vector<std::pair<int, std::string>> recent_failures();

} // namespace mccl::torch_backend
