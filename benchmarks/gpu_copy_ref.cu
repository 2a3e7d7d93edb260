// The reference for `gputop-dl machine`'s host<->device copy rates, in plain CUDA C (no torch):
// the way CUDA's samples' bandwidthTest measures, cudaMemcpy of one buffer timed with CUDA
// events, pinned (cudaMallocHost) and pageable (malloc), H2D and D2H, the median of REPEATS.
//
//   nvcc -O2 -o /tmp/gpu_copy_ref benchmarks/gpu_copy_ref.cu && /tmp/gpu_copy_ref [MIB] [REPEATS]
//
// Prints one JSON object with the same keys as gputop_dl/lab/link_worker.py (bytes per second).
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

static double rate(void *dst, const void *src, size_t n, cudaMemcpyKind kind, int repeats) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  float *ms = (float *)malloc(sizeof(float) * repeats);
  cudaMemcpy(dst, src, n, kind);  // one untimed copy first
  for (int i = 0; i < repeats; i++) {
    cudaEventRecord(a, 0);
    cudaMemcpy(dst, src, n, kind);
    cudaEventRecord(b, 0);
    cudaEventSynchronize(b);
    cudaEventElapsedTime(&ms[i], a, b);
  }
  qsort(ms, repeats, sizeof(float), cmp);
  double med = repeats % 2 ? ms[repeats / 2] : (ms[repeats / 2 - 1] + ms[repeats / 2]) / 2;
  free(ms);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return n / (med / 1e3);
}

int main(int argc, char **argv) {
  int mib = argc > 1 ? atoi(argv[1]) : 256, repeats = argc > 2 ? atoi(argv[2]) : 10;
  size_t n = (size_t)mib << 20;
  void *d;
  if (cudaMalloc(&d, n) != cudaSuccess) {
    printf("{\"error\": \"cudaMalloc failed\"}\n");
    return 1;
  }
  void *pinned, *pageable = malloc(n);
  cudaMallocHost(&pinned, n);
  memset(pinned, 1, n);
  memset(pageable, 1, n);
  printf("{\"bytes\": %zu, \"repeats\": %d, \"h2d_pinned_bps\": %.0f, \"d2h_pinned_bps\": %.0f, "
         "\"h2d_pageable_bps\": %.0f, \"d2h_pageable_bps\": %.0f}\n",
         n, repeats, rate(d, pinned, n, cudaMemcpyHostToDevice, repeats),
         rate(pinned, d, n, cudaMemcpyDeviceToHost, repeats),
         rate(d, pageable, n, cudaMemcpyHostToDevice, repeats),
         rate(pageable, d, n, cudaMemcpyDeviceToHost, repeats));
  return 0;
}
