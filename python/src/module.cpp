/// mccl._C: the extension module behind the Python package `mccl`.
/// It binds ProcessGroupMCCL (a c10d::ProcessGroup subclass), the settings
/// made from Python, and the metrics summary. The package's __init__.py
/// registers the backend with torch.distributed.

#include "process_group_mccl.hpp"
#include "settings.hpp"

#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <mccl/metrics.hpp>

namespace py = pybind11;
using namespace mccl::torch_backend;

namespace {

/// mccl::metrics_summary as plain Python data; python/mccl/metrics.py
/// wraps it in an object with attributes.
py::dict to_dict(const mccl::metrics_summary& s) {
  py::dict algorithms, ops;
  for (const auto& [name, k] : s.ops) {
    py::dict per_algo;
    for (const auto& [algo, n] : k.algorithms)
      per_algo[py::str(algo)] = n;
    algorithms[py::str(name)] = per_algo;
    py::dict op;
    op["ops"] = k.ops;
    op["errors"] = k.errors;
    op["bytes"] = k.bytes;
    op["wire_bytes"] = k.wire_bytes;
    op["p50_latency_ms"] = k.p50_latency_ms;
    op["p99_latency_ms"] = k.p99_latency_ms;
    op["algorithms"] = per_algo;
    ops[py::str(name)] = op;
  }
  py::list links;
  for (const auto& l : s.links) {
    py::dict link;
    link["comm_id"] = l.comm_id;
    link["rank"] = l.rank;
    link["peer"] = l.peer;
    link["bytes_sent"] = l.bytes_sent;
    link["bytes_received"] = l.bytes_received;
    link["retransmits"] = l.retransmits;
    link["reconnects"] = l.reconnects;
    links.append(link);
  }
  py::dict d;
  d["total_ops"] = s.total_ops;
  d["total_bytes"] = s.total_bytes;
  d["wire_bytes"] = s.wire_bytes;
  d["errors"] = s.errors;
  d["p50_latency_ms"] = s.p50_latency_ms;
  d["p99_latency_ms"] = s.p99_latency_ms;
  d["peak_throughput_gbps"] = s.peak_throughput_gbps;
  d["algorithms"] = algorithms;
  d["ops"] = ops;
  d["links"] = links;
  return d;
}

} // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "mccl's torch.distributed backend (C++ part)";
  // The ProcessGroup base class must be registered with pybind11 before we
  // derive from it.
  py::module::import("torch._C._distributed_c10d");

  py::register_exception<mccl::error>(m, "MCCLError", PyExc_RuntimeError);

  py::class_<process_group_mccl, c10::intrusive_ptr<process_group_mccl>, ::c10d::ProcessGroup>(
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
    .def("shutdown", &process_group_mccl::shutdown, py::call_guard<py::gil_scoped_release>());

  m.def("settings_table", [] {
    py::list out;
    for (const auto& s : mccl::all_settings())
      out.append(py::make_tuple(s.name, s.default_value, s.allowed, s.doc));
    return out;
  }, "Every setting: (MCCL_* name, default, allowed values, description).");
  m.def("set_setting", &set_python_setting, py::arg("name"), py::arg("value"),
        "Sets an MCCL_* setting explicitly (beats the environment); validates it now.");
  m.def("clear_settings", &clear_python_settings);
  m.def("python_settings", [] { return python_settings().values(); });
  m.def("describe_settings", [] { return mccl::describe(resolved_settings()); },
        "The resolved configuration, one MCCL_X=value (source) line per setting.");
  m.def("release_runtime", &release_runtime, py::call_guard<py::gil_scoped_release>());

  m.def("get_metrics", [] { return to_dict(mccl::get_metrics()); });
  m.def("reset_metrics", &mccl::reset_metrics);
  m.def("metrics_line", [] { return mccl::describe(mccl::get_metrics()); });
  m.def("log_metrics", &mccl::log_metrics);
}
