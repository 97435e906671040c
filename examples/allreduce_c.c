/* mccl from C: sum a vector across ranks through the C API.
 *
 *   tools/mcclrun -n 4 build/examples/allreduce_c_example
 *
 * The same calls are what a binding from another language makes (Python's
 * mccl.distributed makes them through ctypes). */
#include <mccl/mccl.h>

#include <stdio.h>
#include <stdlib.h>

/* Prints the failed call's message and leaves: every mccl error names the
 * op, rank, peer or setting involved. */
static void check(mccl_status_t status, const char* what) {
  if (status != MCCL_OK) {
    fprintf(stderr, "%s failed (%s): %s\n", what, mccl_status_name(status), mccl_last_error());
    exit(1);
  }
}

int main(void) {
  mccl_runtime_t rt;
  mccl_comm_t comm;
  check(mccl_runtime_create(&rt), "mccl_runtime_create");
  /* RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from mcclrun or torchrun
     (or MLX_RANK and MLX_HOSTFILE from mlx.launch); alone: a group of one. */
  check(mccl_comm_from_env(rt, 0, &comm), "mccl_comm_from_env");
  int rank, size;
  check(mccl_comm_rank(comm, &rank), "mccl_comm_rank");
  check(mccl_comm_size(comm, &size), "mccl_comm_size");

  enum { N = 1 << 20 };
  float* grad = malloc(N * sizeof(float));
  for (int i = 0; i < N; ++i)
    grad[i] = (float)(rank + 1);

  /* Async: start the op, do other work, then wait. NULL instead of &work waits at once. */
  mccl_work_t work;
  check(mccl_allreduce(comm, grad, grad, N, MCCL_FLOAT32, MCCL_AVG, &work), "mccl_allreduce");
  check(mccl_work_wait(work), "mccl_work_wait");
  mccl_work_free(work);

  printf("rank %d of %d: average %.2f (expected %.2f)\n", rank, size, grad[0], (size + 1) / 2.0);
  free(grad);
  check(mccl_comm_destroy(comm), "mccl_comm_destroy");
  check(mccl_runtime_destroy(rt), "mccl_runtime_destroy");
  return 0;
}
