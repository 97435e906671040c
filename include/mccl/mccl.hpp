#pragma once
/// mccl: collective communication for CPU memory, built as actors. The
/// whole public API in one include:
///
/// - communicator.hpp: the runtime, communicators, comm_options;
/// - work.hpp: the handle every op returns;
/// - types.hpp, error.hpp, config.hpp (with algo_spec.hpp): dtypes and
///   reductions, errors, settings;
/// - store.hpp, faults.hpp: a rendezvous store of your own, fault scenarios;
/// - step_collective.hpp, program_phase.hpp: writing a collective of your
///   own from whole messages (mccl chunks, holds early messages, keeps
///   buffers alive), and running one of mccl's step programs inside it;
/// - collective.hpp, program.hpp, schedule.hpp: the lower-level extension
///   point (frames), and the pure schedule helpers mccl's algorithms are
///   made of.
///
/// Only the headers of include/mccl/ are installed, and none of them
/// includes anything else of mccl's.

#include <mccl/algo_spec.hpp>
#include <mccl/collective.hpp>
#include <mccl/communicator.hpp>
#include <mccl/config.hpp>
#include <mccl/error.hpp>
#include <mccl/faults.hpp>
#include <mccl/metrics.hpp>
#include <mccl/program.hpp>
#include <mccl/program_phase.hpp>
#include <mccl/schedule.hpp>
#include <mccl/step_collective.hpp>
#include <mccl/store.hpp>
#include <mccl/types.hpp>
#include <mccl/work.hpp>
