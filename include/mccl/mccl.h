#ifndef MCCL_MCCL_H
#define MCCL_MCCL_H
/* mccl's C API: the whole library behind opaque handles, for programs in C
 * and for bindings from other languages (Python's mccl.distributed is built
 * on it through ctypes).
 *
 *   mccl_runtime_t rt;  mccl_comm_t comm;
 *   if (mccl_runtime_create(&rt) != MCCL_OK) { puts(mccl_last_error()); ... }
 *   mccl_comm_from_env(rt, 0, &comm);               RANK, WORLD_SIZE, MASTER_ADDR, ...
 *   mccl_allreduce(comm, x, x, n, MCCL_FLOAT32, MCCL_SUM, NULL);   NULL: wait here
 *   mccl_work_t w;
 *   mccl_allreduce(comm, x, x, n, MCCL_FLOAT32, MCCL_SUM, &w);     async
 *   mccl_work_wait(w);  mccl_work_free(w);
 *   mccl_comm_destroy(comm);  mccl_runtime_destroy(rt);
 *
 * Rules of the road:
 * - Every function returns an mccl_status_t (MCCL_OK = 0). On failure the
 *   calling thread's mccl_last_error() says what went wrong, naming the op,
 *   rank, peer or setting; it stays valid until the thread's next failing call.
 * - No C++ type crosses this header; dtypes, reductions and status codes
 *   have fixed numeric values, and handles are pointers to incomplete types.
 * - ABI: MCCL_C_API_VERSION changes whenever a signature or a numeric value
 *   changes incompatibly; compare it with mccl_c_api_version() at run time.
 *   Functions are only ever added.
 * - Ops follow mccl's contract (docs/c-api.md): every rank of a communicator calls
 *   the same collectives in the same order with matching arguments; buffers
 *   stay valid until the op is done. Every wait is bounded (MCCL_TIMEOUT_MS).
 * - Thread-safe: handles may be used from several threads.
 */
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MCCL_C_API_VERSION 1

/* ---- status codes (values never change) ---------------------------------- */
typedef enum mccl_status {
  MCCL_OK = 0,
  MCCL_ERR_INVALID_CONFIG = 1,    /* a setting or environment variable has a bad value */
  MCCL_ERR_INVALID_ARGUMENT = 2,  /* arguments make no sense (null buffer, bad root, ...) */
  MCCL_ERR_UNSUPPORTED = 3,       /* a valid request mccl does not implement */
  MCCL_ERR_RENDEZVOUS_FAILED = 4, /* the rendezvous store could not be reached */
  MCCL_ERR_CONNECT_FAILED = 5,    /* a peer could not be reached in time */
  MCCL_ERR_HANDSHAKE_REFUSED = 6, /* a connection was refused (token, version, rank) */
  MCCL_ERR_TIMEOUT = 7,           /* an op passed its deadline */
  MCCL_ERR_PEER_LOST = 8,         /* a peer's connection closed or failed */
  MCCL_ERR_ABORTED = 9,           /* the communicator was aborted */
  MCCL_ERR_PROTOCOL = 10,         /* a malformed or unexpected frame */
  MCCL_ERR_FINALIZED = 11,        /* the communicator or runtime was shut down */
  MCCL_ERR_INTERNAL = 12,         /* a bug in mccl: please report it */
  MCCL_ERR_DESYNC = 13,           /* ranks issued different ops at the same sequence number */
  MCCL_ERR_REVOKED = 14           /* the communicator was revoked: only shrink, split, grow, reconfigure, finalize */
} mccl_status_t;

/* ---- element types and reductions (values travel on the wire) ------------ */
typedef enum mccl_dtype {
  MCCL_FLOAT32 = 0,
  MCCL_FLOAT64 = 1,
  MCCL_FLOAT16 = 2,
  MCCL_BFLOAT16 = 3,
  MCCL_INT8 = 4,
  MCCL_UINT8 = 5,
  MCCL_INT32 = 6,
  MCCL_INT64 = 7,
  MCCL_BOOL = 8, /* one byte holding 0 or 1 */
  MCCL_INT16 = 9,
  MCCL_UINT16 = 10,
  MCCL_UINT32 = 11,
  MCCL_UINT64 = 12,
  /* Not dtypes: they make the type as wide as an int, so that any value a
     caller passes is representable and refused by name, not undefined. */
  MCCL_DTYPE_ENUM_MIN_ = -0x7fffffff - 1,
  MCCL_DTYPE_ENUM_MAX_ = 0x7fffffff
} mccl_dtype_t;

typedef enum mccl_redop {
  MCCL_SUM = 0,
  MCCL_PROD = 1,
  MCCL_MIN = 2,
  MCCL_MAX = 3,
  MCCL_AVG = 4,
  MCCL_BAND = 5,
  MCCL_BOR = 6,
  MCCL_BXOR = 7,
  MCCL_REDOP_ENUM_MIN_ = -0x7fffffff - 1, /* as for mccl_dtype_t */
  MCCL_REDOP_ENUM_MAX_ = 0x7fffffff
} mccl_redop_t;

/* ---- handles ---------------------------------------------------------------- */
typedef struct mccl_runtime_s* mccl_runtime_t; /* the process's runtime (threads, I/O) */
typedef struct mccl_comm_s* mccl_comm_t;       /* a group of ranks */
typedef struct mccl_work_s* mccl_work_t;       /* one op in flight */

/* ---- version and errors --------------------------------------------------- */
/* MCCL_C_API_VERSION of the library loaded at run time. */
uint32_t mccl_c_api_version(void);
/* "0.1.0" */
const char* mccl_version(void);
/* The calling thread's last error message ("" if none). */
const char* mccl_last_error(void);
/* "ok", "invalid_config", ... ; "unknown" outside the enum. */
const char* mccl_status_name(mccl_status_t status);
/* Bytes per element of `type`; 0 outside the enum. */
size_t mccl_dtype_size(mccl_dtype_t type);

/* ---- settings (the MCCL_* variables, set explicitly) ------------------------
 * Values set here beat the environment for communicators created afterwards
 * (MCCL_WORKER_THREADS and MCCL_LOG_LEVEL: runtimes created afterwards).
 * A bad name or value fails at once, naming it. */
mccl_status_t mccl_set_setting(const char* name, const char* value);
mccl_status_t mccl_clear_settings(void);
/* Number of settings; then each one's MCCL_* name, default, allowed values
 * and description (static strings). */
size_t mccl_setting_count(void);
mccl_status_t mccl_setting_info(size_t index, const char** name, const char** default_value,
                                const char** allowed, const char** doc);
/* The values set with mccl_set_setting as "NAME=value" lines, and the
 * resolved configuration as "MCCL_X=value (source)" lines. The string stays
 * valid until the calling thread's next call of the same function. */
mccl_status_t mccl_explicit_settings(const char** text);
mccl_status_t mccl_describe_settings(const char** text);

/* ---- runtime ----------------------------------------------------------------
 * A handle to the process's one runtime, started by the first handle (with
 * the settings made so far) and stopped when the last handle and the last
 * communicator are gone. */
mccl_status_t mccl_runtime_create(mccl_runtime_t* out);
mccl_status_t mccl_runtime_destroy(mccl_runtime_t rt);

/* ---- communicators ------------------------------------------------------------ */
typedef struct mccl_comm_options {
  int rank;
  int world_size;
  const char* master_addr; /* rank 0 serves the rendezvous store here; NULL: 127.0.0.1 */
  int master_port;
  uint32_t comm_id; /* tells apart communicators that share a master port */
} mccl_comm_options_t;

/* Blocks until every peer is connected (MCCL_CONNECT_TIMEOUT_MS). */
mccl_status_t mccl_comm_create(mccl_runtime_t rt, const mccl_comm_options_t* options,
                               mccl_comm_t* out);
/* The world the launcher describes: RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT
 * (mcclrun, torchrun), else MLX_RANK with MLX_HOSTFILE or MLX_JACCL_COORDINATOR
 * (mlx.launch). Nothing set: a group of one, or with `strict` an
 * MCCL_ERR_INVALID_CONFIG naming what is missing. */
mccl_status_t mccl_comm_from_env(mccl_runtime_t rt, int strict, mccl_comm_t* out);
mccl_status_t mccl_comm_rank(mccl_comm_t comm, int* rank);
mccl_status_t mccl_comm_size(mccl_comm_t comm, int* size);
/* Collective: ranks with the same color form a new communicator ordered by
 * key (ties by rank). A negative color joins none: *out is set to NULL. */
mccl_status_t mccl_comm_split(mccl_comm_t comm, int color, int key, mccl_comm_t* out);
/* The ranks not in excluded[0..n) form a new communicator (after failures). */
mccl_status_t mccl_comm_shrink(mccl_comm_t comm, const int* excluded, size_t n, mccl_comm_t* out);
/* Fails in-flight and later ops on every rank, naming this rank and reason. */
mccl_status_t mccl_comm_abort(mccl_comm_t comm, const char* reason);
/* Revokes the communicator on every rank (see docs/cpp-api.md, "Revoke"):
 * ops in flight fail with MCCL_ERR_REVOKED naming this rank and reason,
 * unless some rank completed them before it learned of the revoke (then they
 * complete everywhere); later ops return MCCL_ERR_REVOKED at once. The
 * handle stays valid for mccl_comm_shrink, mccl_comm_split and
 * mccl_comm_destroy. */
mccl_status_t mccl_comm_revoke(mccl_comm_t comm, const char* reason);
/* *revoked = 1 once this rank knows the communicator is revoked (its own
 * mccl_comm_revoke or a peer's), else 0. */
mccl_status_t mccl_comm_revoked(mccl_comm_t comm, int* revoked);

/* ---- elastic membership (docs/c-api.md, "Grow and reconfigure") -------------
 * Handles are printable strings; a returned one is valid until this thread
 * calls the same function again (copy it to keep it). */
/* On one rank: a handle growing comm to new_size ranks. */
mccl_status_t mccl_comm_grow_handle(mccl_comm_t comm, int new_size, const char** handle);
/* Every rank of comm: the grown communicator; old ranks keep theirs. */
mccl_status_t mccl_comm_grow(mccl_comm_t comm, const char* handle, mccl_comm_t* out);
/* A newcomer: joins the grown communicator as rank (old size <= rank <
 * new size), or with -1 as the first rank no other newcomer claimed. */
mccl_status_t mccl_comm_join(mccl_runtime_t rt, const char* handle, int rank, mccl_comm_t* out);
/* This member's reconfigure handle (the same on every call). */
mccl_status_t mccl_comm_reconfigure_handle(mccl_comm_t comm, const char** handle);
/* A fresh reconfigure handle for a process without a communicator. */
mccl_status_t mccl_reconfigure_handle(mccl_runtime_t rt, const char** handle);
/* Builds the next communicator from handles[0..n) (rank = place in the
 * list), all or nothing within timeout_ms: on failure every member gets an
 * error, no communicator, and keeps comm; retry with a new uuid. */
mccl_status_t mccl_comm_reconfigure(mccl_comm_t comm, const char* uuid, const char* const* handles, size_t n,
                                    int64_t timeout_ms, mccl_comm_t* out);
/* The same for a newcomer: `mine` is the handle mccl_reconfigure_handle gave it. */
mccl_status_t mccl_reconfigure(mccl_runtime_t rt, const char* mine, const char* uuid, const char* const* handles,
                               size_t n, int64_t timeout_ms, mccl_comm_t* out);
/* Finalizes the communicator (prompt also when peers are gone) and frees the
 * handle. NULL is ignored. */
mccl_status_t mccl_comm_destroy(mccl_comm_t comm);

/* ---- ops -----------------------------------------------------------------------
 * Every op takes `work`: NULL waits for the op before returning (its error is
 * the return value); otherwise *work receives a handle to wait on and free.
 * Counts are elements; `count` is per rank where an op moves one block per
 * rank. In-place forms alias the buffers as in the C++ API (communicator.hpp). */
mccl_status_t mccl_allreduce(mccl_comm_t comm, const void* send, void* recv, size_t count,
                             mccl_dtype_t type, mccl_redop_t op, mccl_work_t* work);
mccl_status_t mccl_broadcast(mccl_comm_t comm, const void* send, void* recv, size_t count,
                             mccl_dtype_t type, int root, mccl_work_t* work);
mccl_status_t mccl_reduce(mccl_comm_t comm, const void* send, void* recv, size_t count,
                          mccl_dtype_t type, mccl_redop_t op, int root, mccl_work_t* work);
/* recv: count * size elements, every rank's block in rank order. */
mccl_status_t mccl_allgather(mccl_comm_t comm, const void* send, void* recv, size_t count,
                             mccl_dtype_t type, mccl_work_t* work);
/* counts[size]: elements from each rank, the same array on every rank. */
mccl_status_t mccl_allgatherv(mccl_comm_t comm, const void* send, void* recv,
                              const size_t* counts, mccl_dtype_t type, mccl_work_t* work);
/* send: count * size elements; recv: this rank's count-element block of the reduction. */
mccl_status_t mccl_reduce_scatter(mccl_comm_t comm, const void* send, void* recv, size_t count,
                                  mccl_dtype_t type, mccl_redop_t op, mccl_work_t* work);
mccl_status_t mccl_reduce_scatterv(mccl_comm_t comm, const void* send, void* recv,
                                   const size_t* counts, mccl_dtype_t type, mccl_redop_t op,
                                   mccl_work_t* work);
mccl_status_t mccl_gather(mccl_comm_t comm, const void* send, void* recv, size_t count,
                          mccl_dtype_t type, int root, mccl_work_t* work);
mccl_status_t mccl_scatter(mccl_comm_t comm, const void* send, void* recv, size_t count,
                           mccl_dtype_t type, int root, mccl_work_t* work);
mccl_status_t mccl_alltoall(mccl_comm_t comm, const void* send, void* recv, size_t count,
                            mccl_dtype_t type, mccl_work_t* work);
/* send_counts[size] go to each rank, recv_counts[size] come from each rank. */
mccl_status_t mccl_alltoallv(mccl_comm_t comm, const void* send, const size_t* send_counts,
                             void* recv, const size_t* recv_counts, mccl_dtype_t type,
                             mccl_work_t* work);
mccl_status_t mccl_barrier(mccl_comm_t comm, mccl_work_t* work);
/* Tagged point to point; messages from one peer with one tag arrive in order. */
mccl_status_t mccl_send(mccl_comm_t comm, const void* data, size_t count, mccl_dtype_t type,
                        int peer, uint32_t tag, mccl_work_t* work);
mccl_status_t mccl_recv(mccl_comm_t comm, void* data, size_t count, mccl_dtype_t type, int peer,
                        uint32_t tag, mccl_work_t* work);

/* ---- work ---------------------------------------------------------------------- */
/* Blocks until the op is done; returns its error, if any. */
mccl_status_t mccl_work_wait(mccl_work_t work);
/* Waits up to timeout_ms; *done = 1 once finished (the return value is then
 * the op's status), 0 while it still runs. */
mccl_status_t mccl_work_wait_for(mccl_work_t work, int64_t timeout_ms, int* done);
/* Non-blocking: *done = 1 once the op finished (successfully or not). */
mccl_status_t mccl_work_test(mccl_work_t work, int* done);
/* Frees the handle (the op itself runs on; its buffers must stay valid until
 * it is done). NULL is ignored. */
mccl_status_t mccl_work_free(mccl_work_t work);

/* ---- metrics ------------------------------------------------------------------- */
/* This process's metrics as JSON (totals, per op kind and algorithm, per
 * link) or in Prometheus text format for `rank`; valid until the calling
 * thread's next call of the same function. */
mccl_status_t mccl_metrics_json(const char** text);
mccl_status_t mccl_metrics_prometheus(int rank, const char** text);
/* The line mccl_log_metrics writes (ops, bytes, latencies per op kind). */
mccl_status_t mccl_metrics_summary(const char** text);
/* One summary line per op kind, written to stderr through mccl's logger. */
mccl_status_t mccl_log_metrics(void);
mccl_status_t mccl_reset_metrics(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MCCL_MCCL_H */
