/// mccl._C: the torch.distributed backend's extension module. It binds
/// ProcessGroupMCCL (a c10d::Backend subclass); settings, metrics and
/// the numpy API go through libmccl's C API (python/mccl/_lib.py), and
/// python/mccl/torch_backend.py registers the backend.

#include "process_group_mccl.hpp"
#include "torch_visible_error.hpp"

#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/csrc/utils/pybind.h>

#include <stdexcept>

namespace py = pybind11;
using namespace mccl::torch_backend;

namespace {

void raise_mccl_error(mccl::errc code, const char* what) {
  py::object exc = py::module::import("mccl.errors").attr("from_code")(static_cast<int>(code), what);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
}

/// mccl::error, and the torch_visible_error a failed Work or future holds,
/// become the class of mccl.errors for their code, the same the numpy API
/// raises, so `except mccl.PeerLostError` works for both.
void translate_mccl_error(std::exception_ptr p) {
  try {
    if (p)
      std::rethrow_exception(p);
  } catch (const mccl::error& e) {
    // An op that failed as it was issued: a comm hook's callback may
    // raise it through torch's Future.then too (hooks.keep_mccl_errors).
    remember_failure(e.code(), e.what());
    raise_mccl_error(e.code(), e.what());
  } catch (const torch_visible_error& e) {
    raise_mccl_error(e.code(), e.what());
  }
}

/// Fails `fut` (a torch.futures.Future a comm hook returns) with `exc`, the
/// exception its callback raised: an mccl.MCCLError as a
/// torch_visible_error (DDP's backward raises the same class), anything
/// else as the RuntimeError torch's Future.then would make of it.
void fail_future(const std::shared_ptr<torch::jit::PythonFutureWrapper>& fut, const py::handle& exc) {
  std::string text = py::str(exc);
  std::exception_ptr failure;
  if (py::isinstance(exc, py::module::import("mccl.errors").attr("MCCLError"))) {
    auto code = static_cast<mccl::errc>(exc.attr("code").cast<int>());
    failure = std::make_exception_ptr(torch_visible_error(code, text));
  } else {
    std::string type = py::str(py::type::handle_of(exc).attr("__name__"));
    failure = std::make_exception_ptr(
      std::runtime_error("Got the following error when running the callback: " + type + ": " + text));
  }
  // Completing runs the future's callbacks (DDP's, other hooks'), which
  // take the GIL themselves.
  py::gil_scoped_release unlocked;
  fut->fut->setError(std::move(failure));
}

} // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "mccl's torch.distributed backend (C++ part)";
  // The Backend base class must be registered with pybind11 before we
  // derive from it.
  py::module::import("torch._C._distributed_c10d");

  py::register_exception_translator(&translate_mccl_error);

  py::class_<process_group_mccl, c10::intrusive_ptr<process_group_mccl>, ::c10d::Backend>(
    m, "ProcessGroupMCCL")
    .def(py::init([](const c10::intrusive_ptr<::c10d::Store>& store, int rank, int size,
                     int64_t timeout_ms, const std::string& group_name) {
           return c10::make_intrusive<process_group_mccl>(store, rank, size,
                                                          std::chrono::milliseconds(timeout_ms),
                                                          group_name);
         }),
         py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout_ms"),
         py::arg("group_name") = "",
         // Connecting blocks until every peer has arrived.
         py::call_guard<py::gil_scoped_release>())
    .def_property_readonly("op_timeout_ms",
                           [](const process_group_mccl& pg) { return pg.op_timeout().count(); })
    .def("allreduce_compressed", &process_group_mccl::allreduce_compressed, py::arg("tensors"),
         py::arg("compression"), py::arg("op") = "avg", py::arg("topk_ratio") = 0.0,
         py::arg("error_feedback") = true, py::arg("topk_key") = 0,
         py::call_guard<py::gil_scoped_release>())
    // torch's Python bindings of Backend leave getError out (its C++
    // callers are watchdogs); bound here so Python can ask too.
    .def("get_error", &process_group_mccl::getError)
    .def("shutdown", &process_group_mccl::shutdown, py::call_guard<py::gil_scoped_release>());

  // For python/mccl/hooks.py: failing a hook's future with an mccl error,
  // and the latest failures' texts (what torch's Future.then keeps of them).
  m.def("_fail_future", &fail_future, py::arg("future"), py::arg("error"));
  m.def("_recent_failures", &recent_failures);
}
