/* The C API (include/mccl/mccl.h) from C, one process per rank under
 * mcclrun: every op with every dtype and reduction it applies to, async
 * work, split, reconfigure, grow's handle, settings, errors and metrics. Prints "c_api ok" on success;
 * any mismatch prints what differed and exits 1. Compiled as C11: no C++
 * type may cross the header. */
#include <mccl/mccl.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank_, world_;

#define CHECK(cond, ...)                                                         \
  do {                                                                           \
    if (!(cond)) {                                                               \
      fprintf(stderr, "rank %d: %s:%d: ", rank_, __FILE__, __LINE__);            \
      fprintf(stderr, __VA_ARGS__);                                              \
      fprintf(stderr, "\n");                                                     \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

#define OK(call)                                                                 \
  do {                                                                           \
    mccl_status_t s_ = (call);                                                   \
    CHECK(s_ == MCCL_OK, "%s -> %s: %s", #call, mccl_status_name(s_), mccl_last_error()); \
  } while (0)

/* Element i of rank r's contribution, small enough to be exact in every dtype. */
static int value(int r, size_t i) { return (int)((r + 1) * 3 + (i % 5)); }

/* Writes v into element i of a buffer of `type`. */
static void put(void* buf, mccl_dtype_t type, size_t i, double v) {
  switch (type) {
    case MCCL_FLOAT32: ((float*)buf)[i] = (float)v; break;
    case MCCL_FLOAT64: ((double*)buf)[i] = v; break;
    case MCCL_INT8: ((int8_t*)buf)[i] = (int8_t)v; break;
    case MCCL_UINT8: ((uint8_t*)buf)[i] = (uint8_t)v; break;
    case MCCL_INT32: ((int32_t*)buf)[i] = (int32_t)v; break;
    case MCCL_INT64: ((int64_t*)buf)[i] = (int64_t)v; break;
    case MCCL_BOOL: ((uint8_t*)buf)[i] = v != 0; break;
    case MCCL_FLOAT16: /* small integers: sign 0, exponent and mantissa by hand */
    case MCCL_BFLOAT16: {
      float f = (float)v;
      uint32_t bits;
      memcpy(&bits, &f, 4);
      uint16_t h;
      if (type == MCCL_BFLOAT16) {
        h = (uint16_t)(bits >> 16); /* exact for small integers */
      } else {
        int e = (int)((bits >> 23) & 0xff) - 127 + 15;
        h = f == 0 ? 0 : (uint16_t)((e << 10) | ((bits >> 13) & 0x3ff));
      }
      ((uint16_t*)buf)[i] = h;
      break;
    }
    default: break; /* the enum's range markers, not dtypes */
  }
}

static double get(const void* buf, mccl_dtype_t type, size_t i) {
  switch (type) {
    case MCCL_FLOAT32: return ((const float*)buf)[i];
    case MCCL_FLOAT64: return ((const double*)buf)[i];
    case MCCL_INT8: return ((const int8_t*)buf)[i];
    case MCCL_UINT8: return ((const uint8_t*)buf)[i];
    case MCCL_INT32: return ((const int32_t*)buf)[i];
    case MCCL_INT64: return (double)((const int64_t*)buf)[i];
    case MCCL_BOOL: return ((const uint8_t*)buf)[i];
    case MCCL_FLOAT16:
    case MCCL_BFLOAT16: {
      uint16_t h = ((const uint16_t*)buf)[i];
      uint32_t bits;
      if (type == MCCL_BFLOAT16) {
        bits = (uint32_t)h << 16;
      } else if (h == 0) {
        bits = 0;
      } else {
        bits = ((uint32_t)(((h >> 10) & 0x1f) - 15 + 127) << 23) | ((uint32_t)(h & 0x3ff) << 13);
      }
      float f;
      memcpy(&f, &bits, 4);
      return f;
    }
    default: break;
  }
  return -1;
}

static void* fill(mccl_dtype_t type, size_t n, int r) {
  void* buf = calloc(n ? n : 1, mccl_dtype_size(type));
  for (size_t i = 0; i < n; ++i)
    put(buf, type, i, type == MCCL_BOOL ? (value(r, i) % 2) : value(r, i));
  return buf;
}

static mccl_comm_t comm_;

static void check_sum_every_dtype(void) {
  const mccl_dtype_t types[] = {MCCL_FLOAT32, MCCL_FLOAT64, MCCL_FLOAT16, MCCL_BFLOAT16, MCCL_INT8,
                                MCCL_UINT8,   MCCL_INT32,   MCCL_INT64,   MCCL_BOOL};
  const size_t n = 1003;
  for (size_t t = 0; t < sizeof types / sizeof types[0]; ++t) {
    mccl_dtype_t type = types[t];
    void* x = fill(type, n, rank_);
    mccl_redop_t op = type == MCCL_BOOL ? MCCL_MAX : MCCL_SUM;
    OK(mccl_allreduce(comm_, x, x, n, type, op, NULL)); /* in place */
    for (size_t i = 0; i < n; ++i) {
      double want = 0;
      for (int r = 0; r < world_; ++r)
        want = type == MCCL_BOOL ? (want || value(r, i) % 2) : want + value(r, i);
      CHECK(get(x, type, i) == want, "allreduce dtype %d element %zu: %g, want %g", (int)type, i,
            get(x, type, i), want);
    }
    free(x);
  }
}

static void check_reductions(void) {
  const mccl_redop_t ops[] = {MCCL_SUM, MCCL_PROD, MCCL_MIN, MCCL_MAX, MCCL_AVG, MCCL_BAND, MCCL_BOR, MCCL_BXOR};
  const size_t n = 64;
  for (size_t k = 0; k < sizeof ops / sizeof ops[0]; ++k) {
    int32_t x[64], y[64];
    for (size_t i = 0; i < n; ++i)
      x[i] = value(rank_, i);
    OK(mccl_allreduce(comm_, x, y, n, MCCL_INT32, ops[k], NULL));
    for (size_t i = 0; i < n; ++i) {
      int64_t want = value(0, i);
      for (int r = 1; r < world_; ++r) {
        int64_t v = value(r, i);
        switch (ops[k]) {
          case MCCL_SUM: case MCCL_AVG: want += v; break;
          case MCCL_PROD: want *= v; break;
          case MCCL_MIN: want = v < want ? v : want; break;
          case MCCL_MAX: want = v > want ? v : want; break;
          case MCCL_BAND: want &= v; break;
          case MCCL_BOR: want |= v; break;
          case MCCL_BXOR: want ^= v; break;
          default: break;
        }
      }
      if (ops[k] == MCCL_AVG)
        want /= world_;
      CHECK(y[i] == want, "allreduce op %d element %zu: %d, want %lld", (int)ops[k], i, y[i], (long long)want);
    }
  }
}

static void check_data_movement(void) {
  const size_t n = 257;
  const size_t w = world_ > 0 ? (size_t)world_ : 1; /* sizes below stay non-negative */
  float* mine = fill(MCCL_FLOAT32, n, rank_);
  float* all = calloc(n * w, sizeof(float));
  float* one = calloc(n, sizeof(float));

  OK(mccl_allgather(comm_, mine, all, n, MCCL_FLOAT32, NULL));
  for (int r = 0; r < world_; ++r)
    for (size_t i = 0; i < n; ++i)
      CHECK(all[r * n + i] == value(r, i), "allgather block %d element %zu", r, i);

  size_t* counts = calloc(w, sizeof(size_t));
  size_t total = 0;
  for (int r = 0; r < world_; ++r)
    total += counts[r] = (size_t)(r + 1) * 3;
  float* gathered = calloc(total, sizeof(float));
  OK(mccl_allgatherv(comm_, mine, gathered, counts, MCCL_FLOAT32, NULL));
  for (int r = 0, at = 0; r < world_; at += (int)counts[r], ++r)
    for (size_t i = 0; i < counts[r]; ++i)
      CHECK(gathered[at + i] == value(r, i), "allgatherv block %d element %zu", r, i);

  /* reduce_scatter: rank r gets block r of the sum of everyone's world*n elements. */
  float* big = fill(MCCL_FLOAT32, n * w, rank_);
  OK(mccl_reduce_scatter(comm_, big, one, n, MCCL_FLOAT32, MCCL_SUM, NULL));
  for (size_t i = 0; i < n; ++i) {
    double want = 0;
    for (int r = 0; r < world_; ++r)
      want += value(r, rank_ * n + i);
    CHECK(one[i] == want, "reduce_scatter element %zu: %g, want %g", i, one[i], want);
  }
  float* part = calloc(counts[rank_], sizeof(float));
  float* bigv = fill(MCCL_FLOAT32, total, rank_);
  OK(mccl_reduce_scatterv(comm_, bigv, part, counts, MCCL_FLOAT32, MCCL_MAX, NULL));
  size_t offset = 0;
  for (int r = 0; r < rank_; ++r)
    offset += counts[r];
  for (size_t i = 0; i < counts[rank_]; ++i)
    CHECK(part[i] == value(world_ - 1, offset + i), "reduce_scatterv element %zu", i);

  int root = world_ - 1;
  OK(mccl_broadcast(comm_, mine, one, n, MCCL_FLOAT32, root, NULL));
  for (size_t i = 0; i < n; ++i)
    CHECK(one[i] == value(root, i), "broadcast element %zu", i);
  OK(mccl_reduce(comm_, mine, one, n, MCCL_FLOAT32, MCCL_MIN, root, NULL));
  if (rank_ == root)
    for (size_t i = 0; i < n; ++i)
      CHECK(one[i] == value(0, i), "reduce element %zu", i);
  memset(all, 0, n * w * sizeof(float));
  OK(mccl_gather(comm_, mine, all, n, MCCL_FLOAT32, root, NULL));
  if (rank_ == root)
    for (int r = 0; r < world_; ++r)
      CHECK(all[r * n + n - 1] == value(r, n - 1), "gather block %d", r);
  OK(mccl_scatter(comm_, big, one, n, MCCL_FLOAT32, root, NULL));
  for (size_t i = 0; i < n; ++i)
    CHECK(one[i] == value(root, rank_ * n + i), "scatter element %zu", i);
  OK(mccl_alltoall(comm_, big, all, n, MCCL_FLOAT32, NULL));
  for (int r = 0; r < world_; ++r)
    CHECK(all[r * n] == value(r, rank_ * n), "alltoall block from %d", r);
  size_t* ones = calloc(w, sizeof(size_t));
  for (int r = 0; r < world_; ++r)
    ones[r] = 1;
  float* sent = calloc(w, sizeof(float));
  float* got = calloc(w, sizeof(float));
  for (int r = 0; r < world_; ++r)
    sent[r] = (float)(rank_ * 100 + r);
  OK(mccl_alltoallv(comm_, sent, ones, got, ones, MCCL_FLOAT32, NULL));
  for (int r = 0; r < world_; ++r)
    CHECK(got[r] == r * 100 + rank_, "alltoallv from %d: %g", r, got[r]);
  OK(mccl_barrier(comm_, NULL));

  free(mine); free(all); free(one); free(counts); free(gathered); free(big); free(part);
  free(bigv); free(ones); free(sent); free(got);
}

static void check_point_to_point_and_async(void) {
  int64_t out[16], in[16];
  for (int i = 0; i < 16; ++i)
    out[i] = rank_ * 1000 + i;
  int next = (rank_ + 1) % world_, prev = (rank_ + world_ - 1) % world_;
  mccl_work_t s = NULL, r = NULL;
  OK(mccl_recv(comm_, in, 16, MCCL_INT64, prev, 7, &r));
  OK(mccl_send(comm_, out, 16, MCCL_INT64, next, 7, &s));
  int done = 0;
  OK(mccl_work_wait_for(r, 60000, &done));
  CHECK(done == 1, "the receive from %d did not finish in 60 s", prev);
  OK(mccl_work_wait(s));
  OK(mccl_work_test(s, &done));
  CHECK(done == 1, "a waited send is not done");
  OK(mccl_work_free(s));
  OK(mccl_work_free(r));
  for (int i = 0; i < 16; ++i)
    CHECK(in[i] == prev * 1000 + i, "recv element %d: %lld", i, (long long)in[i]);

  /* Several async collectives in flight at once, waited in reverse order. */
  float a[100], b[100];
  for (int i = 0; i < 100; ++i)
    a[i] = b[i] = 1.0f;
  mccl_work_t wa = NULL, wb = NULL;
  OK(mccl_allreduce(comm_, a, a, 100, MCCL_FLOAT32, MCCL_SUM, &wa));
  OK(mccl_allreduce(comm_, b, b, 100, MCCL_FLOAT32, MCCL_MAX, &wb));
  OK(mccl_work_wait(wb));
  OK(mccl_work_wait(wa));
  mccl_work_free(wa);
  mccl_work_free(wb);
  CHECK(a[99] == world_ && b[99] == 1.0f, "async allreduce: %g %g", a[99], b[99]);
}

static void check_split(void) {
  mccl_comm_t half = NULL;
  OK(mccl_comm_split(comm_, rank_ % 2, -rank_, &half)); /* reversed order by key */
  int r = -1, n = -1;
  OK(mccl_comm_rank(half, &r));
  OK(mccl_comm_size(half, &n));
  CHECK(n == (world_ + 1 - rank_ % 2) / 2, "split size %d", n);
  int32_t x = rank_;
  OK(mccl_allreduce(half, &x, &x, 1, MCCL_INT32, MCCL_SUM, NULL));
  int32_t want = 0;
  for (int q = rank_ % 2; q < world_; q += 2)
    want += q;
  CHECK(x == want, "split allreduce %d, want %d", x, want);
  CHECK(r == (n - 1) - rank_ / 2, "split rank %d for world rank %d of %d", r, rank_, n);
  OK(mccl_comm_destroy(half));

  mccl_comm_t none = (mccl_comm_t)&x;
  OK(mccl_comm_split(comm_, rank_ == 0 ? -1 : 0, 0, &none));
  CHECK((rank_ == 0) == (none == NULL), "a negative color gives NULL");
  OK(mccl_comm_destroy(none));
}

/* Reconfigure into the same ranks in reverse order (handles exchanged with
 * an allgather); grow's handle and its errors (a grow itself needs
 * newcomers: tests/python/test_elastic.py). */
static void check_grow_and_reconfigure(mccl_runtime_t rt) {
  enum { LEN = 256 };
  char mine[LEN] = {0};
  const char* h = NULL;
  OK(mccl_comm_reconfigure_handle(comm_, &h));
  CHECK(strncmp(h, "mccl-member/1 ", 14) == 0 && strlen(h) < LEN, "reconfigure handle: %s", h);
  strcpy(mine, h);
  char* all = calloc((size_t)world_, LEN);
  OK(mccl_allgather(comm_, mine, all, LEN, MCCL_UINT8, NULL));
  const char** list = calloc((size_t)world_, sizeof(char*));
  for (int r = 0; r < world_; ++r)
    list[r] = all + (size_t)(world_ - 1 - r) * LEN;
  mccl_comm_t next = NULL;
  OK(mccl_comm_reconfigure(comm_, "c-api-test", list, (size_t)world_, 10000, &next));
  int r = -1;
  OK(mccl_comm_rank(next, &r));
  CHECK(r == world_ - 1 - rank_, "reconfigured rank %d for world rank %d", r, rank_);
  int32_t x = rank_;
  OK(mccl_allreduce(next, &x, &x, 1, MCCL_INT32, MCCL_SUM, NULL));
  CHECK(x == world_ * (world_ - 1) / 2, "reconfigured allreduce %d", x);
  CHECK(mccl_comm_reconfigure(comm_, "c-api-test", list, (size_t)world_, 1000, &next) == MCCL_ERR_INVALID_ARGUMENT,
        "a used uuid is refused: %s", mccl_last_error());
  OK(mccl_comm_destroy(next));
  /* Member 0's process serves the store where the uuid was used: it stays
   * until every rank has asked. */
  OK(mccl_barrier(comm_, NULL));
  free(list);
  free(all);

  CHECK(mccl_comm_grow_handle(comm_, world_, &h) == MCCL_ERR_INVALID_ARGUMENT, "grow to the same size");
  CHECK(strstr(mccl_last_error(), "must exceed the current size"), "%s", mccl_last_error());
  OK(mccl_comm_grow_handle(comm_, world_ + 1, &h));
  CHECK(strncmp(h, "mccl-grow/1 ", 12) == 0, "grow handle: %s", h);
  mccl_comm_t none = NULL;
  CHECK(mccl_comm_join(rt, h, 0, &none) == MCCL_ERR_INVALID_ARGUMENT && none == NULL, "a newcomer as rank 0");
  CHECK(strstr(mccl_last_error(), "a newcomer's rank"), "%s", mccl_last_error());
  CHECK(mccl_comm_grow(comm_, "mccl-grow/1 store=nowhere", &none) == MCCL_ERR_INVALID_ARGUMENT, "a bad handle");
  CHECK(strstr(mccl_last_error(), "grow on rank"), "%s", mccl_last_error());
}

static void check_errors(void) {
  CHECK(mccl_allreduce(NULL, NULL, NULL, 1, MCCL_FLOAT32, MCCL_SUM, NULL) == MCCL_ERR_INVALID_ARGUMENT,
        "a NULL communicator is refused");
  CHECK(strstr(mccl_last_error(), "mccl_allreduce") && strstr(mccl_last_error(), "comm"),
        "the error names the function and argument: %s", mccl_last_error());
  float x = 1;
  CHECK(mccl_allreduce(comm_, &x, &x, 1, (mccl_dtype_t)42, MCCL_SUM, NULL) == MCCL_ERR_INVALID_ARGUMENT,
        "dtype 42 is refused");
  CHECK(strstr(mccl_last_error(), "dtype 42"), "names the dtype: %s", mccl_last_error());
  mccl_status_t band = mccl_allreduce(comm_, &x, &x, 1, MCCL_FLOAT32, MCCL_BAND, NULL);
  CHECK(band == MCCL_ERR_UNSUPPORTED, "band on float32 is refused: %s: %s", mccl_status_name(band),
        mccl_last_error());
  CHECK(strstr(mccl_last_error(), "band"), "names the reduction: %s", mccl_last_error());
  CHECK(mccl_broadcast(comm_, &x, &x, 1, MCCL_FLOAT32, world_, NULL) == MCCL_ERR_INVALID_ARGUMENT,
        "root %d is refused", world_);
  CHECK(mccl_set_setting("MCCL_CHUNK_BYTES", "lots") == MCCL_ERR_INVALID_CONFIG, "a bad value is refused");
  CHECK(strstr(mccl_last_error(), "MCCL_CHUNK_BYTES"), "names the setting: %s", mccl_last_error());
  CHECK(mccl_set_setting("MCCL_NO_SUCH", "1") == MCCL_ERR_INVALID_CONFIG, "an unknown setting is refused");
  CHECK(strcmp(mccl_status_name(MCCL_ERR_PEER_LOST), "peer_lost") == 0, "status names");
  /* The communicator still works after refused calls. */
  OK(mccl_allreduce(comm_, &x, &x, 1, MCCL_FLOAT32, MCCL_SUM, NULL));
  CHECK(x == world_, "allreduce after errors: %g", x);
}

static void check_settings_and_metrics(void) {
  CHECK(mccl_setting_count() > 20, "settings table has %zu rows", mccl_setting_count());
  const char *name, *def, *allowed, *doc;
  OK(mccl_setting_info(0, &name, &def, &allowed, &doc));
  CHECK(strncmp(name, "MCCL_", 5) == 0 && doc[0] != 0, "setting 0: %s", name);
  CHECK(mccl_setting_info(100000, &name, NULL, NULL, NULL) == MCCL_ERR_INVALID_ARGUMENT, "index out of range");
  OK(mccl_set_setting("MCCL_CHUNK_BYTES", "256K"));
  const char* text = NULL;
  OK(mccl_explicit_settings(&text));
  CHECK(strstr(text, "MCCL_CHUNK_BYTES=256K") != NULL, "explicit settings: %s", text);
  OK(mccl_describe_settings(&text));
  CHECK(strstr(text, "MCCL_CHUNK_BYTES=256K (explicit)") != NULL, "resolved settings lack the explicit value");
  OK(mccl_clear_settings());
  OK(mccl_metrics_json(&text));
  CHECK(strstr(text, "\"allreduce\"") && strstr(text, "\"total_ops\""), "metrics JSON: %.200s", text);
  OK(mccl_metrics_prometheus(rank_, &text));
  CHECK(strstr(text, "mccl_") != NULL, "prometheus text");
}

int main(void) {
  CHECK(mccl_c_api_version() == MCCL_C_API_VERSION, "C API version %u, header %d", mccl_c_api_version(),
        MCCL_C_API_VERSION);
  mccl_runtime_t rt = NULL;
  OK(mccl_runtime_create(&rt));
  OK(mccl_comm_from_env(rt, 1, &comm_));
  OK(mccl_comm_rank(comm_, &rank_));
  OK(mccl_comm_size(comm_, &world_));
  CHECK(world_ >= 2, "run under mcclrun with 2 or more ranks (world %d)", world_);
  check_errors();
  check_sum_every_dtype();
  check_reductions();
  check_data_movement();
  check_point_to_point_and_async();
  check_split();
  check_grow_and_reconfigure(rt);
  check_settings_and_metrics();
  OK(mccl_comm_destroy(comm_));
  OK(mccl_runtime_destroy(rt));
  printf("rank %d of %d: c_api ok (C API %u, mccl %s)\n", rank_, world_, mccl_c_api_version(), mccl_version());
  return 0;
}
