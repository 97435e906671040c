#include "torch_visible_error.hpp"

#include <deque>
#include <mutex>
#include <utility>
#include <vector>

namespace mccl::torch_backend {

namespace {

/// How many failures remember_failure keeps: the ops of one DDP step that
/// failed together (one per gradient bucket) fit many times over.
constexpr std::size_t remembered_failures = 64;

struct failure_log {
  std::mutex mutex;
  std::deque<std::pair<int, std::string>> entries;
};

failure_log& failures() {
  // Never destroyed: a Work may fail while the process exits.
  static auto* log = new failure_log();
  return *log;
}

/// mccl.errors' class for `code`, a new reference, or null with no Python
/// error set.
PyObject* class_for(int code) {
  PyObject* module = PyImport_ImportModule("mccl.errors");
  if (!module) {
    PyErr_Clear();
    return nullptr;
  }
  PyObject* result = nullptr;
  if (PyObject* by_code = PyObject_GetAttrString(module, "_BY_CODE")) {
    PyObject* key = PyLong_FromLong(code);
    if (key) {
      result = PyDict_GetItemWithError(by_code, key); // borrowed
      Py_XINCREF(result);
      Py_DECREF(key);
    }
    Py_DECREF(by_code);
  }
  if (!result && !PyErr_Occurred())
    result = PyObject_GetAttrString(module, "MCCLError");
  PyErr_Clear();
  Py_DECREF(module);
  return result;
}

} // namespace

torch_visible_error::torch_visible_error(const error& e) : torch_visible_error(e.code(), e.what()) {}

torch_visible_error::torch_visible_error(errc code, std::string what)
  : torch::PyTorchError(std::move(what)), code_(code) {}

PyObject* torch_visible_error::python_type() {
  // One class object per code, looked up once and kept for the life of
  // the process (the GIL guards the table).
  static PyObject* classes[256] = {};
  auto& cls = classes[static_cast<uint8_t>(code_)];
  if (!cls)
    cls = class_for(static_cast<int>(code_));
  return cls ? cls : PyExc_RuntimeError;
}

std::exception_ptr visible_to_python(std::exception_ptr failure) {
  if (!failure)
    return failure;
  try {
    std::rethrow_exception(failure);
  } catch (const error& e) {
    return std::make_exception_ptr(torch_visible_error(e));
  } catch (...) {
    return failure;
  }
}

std::optional<errc> mccl_code_of(const std::exception_ptr& failure) {
  if (!failure)
    return std::nullopt;
  try {
    std::rethrow_exception(failure);
  } catch (const error& e) {
    return e.code();
  } catch (const torch_visible_error& e) {
    return e.code();
  } catch (...) {
    return std::nullopt;
  }
}

void remember_failure(errc code, const std::string& what) {
  auto& log = failures();
  std::lock_guard<std::mutex> guard{log.mutex};
  log.entries.emplace_back(static_cast<int>(code), what);
  if (log.entries.size() > remembered_failures)
    log.entries.pop_front();
}

std::vector<std::pair<int, std::string>> recent_failures() {
  auto& log = failures();
  std::lock_guard<std::mutex> guard{log.mutex};
  return {log.entries.begin(), log.entries.end()};
}

} // namespace mccl::torch_backend
