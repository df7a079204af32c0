/* A trainer's loop through the csdkit C API, in C99.
 *
 * Creates the optimizer-state store of a small two-group model (AdamW, fp16 weights and
 * gradients) on 2 emulated SmartSSDs in the directory given on the command line, runs 3 steps
 * with made-up gradients and a per-group learning-rate schedule, copies the fp16 weights out,
 * then closes the store, reopens it and prints the committed step and a checksum of the
 * committed fp32 weights.
 *
 *   train_step DIR      (DIR must be absent or empty)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csdkit/csdkit.h"

#define N_TENSORS 3

/* Reports a failed call with its status and message, and leaves. */
#define CHECK(call)                                                                      \
  do {                                                                                   \
    csdkit_status st_ = (call);                                                          \
    if (st_ != CSDKIT_OK) {                                                              \
      fprintf(stderr, "train_step: %s failed: %s: %s\n", #call, csdkit_status_name(st_), \
              csdkit_last_error());                                                      \
      exit(1);                                                                           \
    }                                                                                    \
  } while (0)

/* An fp16 bit pattern: random sign and mantissa, exponent 2^(e-15) .. 2^(e-12). */
static uint16_t made_up_half(uint64_t seed, uint64_t i, unsigned e) {
  uint64_t x = (seed + i) * 0x9E3779B97F4A7C15ull;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  return (uint16_t)(((x >> 15) & 0x8000u) | ((e + (x >> 10) % 4u) << 10) | (x & 0x3FFu));
}

/* FNV-1a over bytes. */
static uint64_t fnv1a(uint64_t h, const void* p, size_t n) {
  const unsigned char* b = (const unsigned char*)p;
  size_t i;
  for (i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001B3ull;
  return h;
}

int main(int argc, char** argv) {
  /* The model: an embedding and a norm in group 0 (decayed), a head in group 1 (no decay). */
  const char* const names[N_TENSORS] = {"embed.weight", "ln.weight", "head.weight"};
  const uint64_t numels[N_TENSORS] = {70001, 333, 90000};
  const unsigned groups[N_TENSORS] = {0, 0, 1};
  const csdkit_layout layout = {N_TENSORS, names, numels, groups};
  uint16_t* weights[N_TENSORS];
  uint16_t* grads[N_TENSORS];
  void* weight_ptrs[N_TENSORS]; /* the same buffers as the API takes them */
  const void* grad_ptrs[N_TENSORS];
  uint16_t* packed;
  float* theta[N_TENSORS];
  csdkit_device_spec spec;
  csdkit_store_config config;
  csdkit_hyper hyper[2];
  csdkit_store* store = NULL;
  uint64_t total = 0, at = 0, sum = 0xCBF29CE484222325ull;
  int64_t step = 0;
  size_t t;
  uint64_t i;
  int s;

  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR   (an absent or empty directory for the store)\n", argv[0]);
    return 2;
  }
  printf("csdkit C API %d (header %d)\n", csdkit_version(), CSDKIT_VERSION);
  for (t = 0; t < N_TENSORS; ++t) total += numels[t];

  /* Initial fp16 weights, back to back in layout order. */
  packed = (uint16_t*)malloc(total * sizeof *packed);
  if (packed == NULL) return 1;
  for (i = 0; i < total; ++i) packed[i] = made_up_half(1000, i, 7);
  for (t = 0; t < N_TENSORS; ++t) {
    weights[t] = (uint16_t*)malloc(numels[t] * sizeof *weights[t]);
    grads[t] = (uint16_t*)malloc(numels[t] * sizeof *grads[t]);
    theta[t] = (float*)malloc(numels[t] * sizeof *theta[t]);
    if (weights[t] == NULL || grads[t] == NULL || theta[t] == NULL) return 1;
    weight_ptrs[t] = weights[t];
    grad_ptrs[t] = grads[t];
  }

  CHECK(csdkit_device_spec_init(&spec));
  spec.count = 2; /* two emulated SmartSSDs, one shard each */
  CHECK(csdkit_store_config_init(&config));
  config.grad = CSDKIT_FP16;
  config.out = CSDKIT_FP16;
  config.loss_scale = 1024.0; /* gradients arrive multiplied by this */
  CHECK(csdkit_hyper_init(&hyper[0], CSDKIT_ADAMW));
  CHECK(csdkit_hyper_init(&hyper[1], CSDKIT_ADAMW));
  hyper[0].weight_decay = 0.1;
  hyper[1].weight_decay = 0.0;
  CHECK(
      csdkit_store_create(argv[1], &spec, &config, &layout, hyper, 2, packed, CSDKIT_FP16, &store));

  for (s = 1; s <= 3; ++s) {
    csdkit_step_options opts;
    csdkit_step_report report;
    csdkit_hyper now[2];
    double norm = 0;
    /* This step's gradients (already multiplied by the loss scale, as a trainer's are). */
    for (t = 0, at = 0; t < N_TENSORS; at += numels[t], ++t) {
      for (i = 0; i < numels[t]; ++i) grads[t][i] = made_up_half((uint64_t)s << 32, at + i, 13);
    }
    /* A linear learning-rate decay per group. */
    now[0] = hyper[0];
    now[1] = hyper[1];
    now[0].lr = hyper[0].lr * (1.0 - 0.1 * s);
    now[1].lr = hyper[1].lr * (1.0 - 0.2 * s);
    CHECK(csdkit_step_options_init(&opts));
    opts.group_hyper = now;
    opts.n_group_hyper = 2;
    opts.max_norm = 1.0; /* clip the unscaled gradients to global norm 1 */
    CHECK(csdkit_step(store, grad_ptrs, N_TENSORS, &opts, &norm, &report));
    printf(
        "step %lld: %s, grad norm %.6g (scaled), %.3f s, shared link %llu bytes "
        "(host->device %llu, device->host %llu)\n",
        (long long)report.step, report.skipped ? report.skip_reason : "committed", norm,
        report.seconds, (unsigned long long)report.shared_link_bytes,
        (unsigned long long)report.link_bytes[CSDKIT_LINK_HOST_TO_DEVICE],
        (unsigned long long)report.link_bytes[CSDKIT_LINK_DEVICE_TO_HOST]);
    if (report.skipped) return 1;
    /* The fp16 weights of this step, for the next forward pass. */
    CHECK(csdkit_weights_out(store, weight_ptrs, N_TENSORS));
  }
  CHECK(csdkit_store_close(store));

  /* The store is the checkpoint: reopen it and read the committed fp32 weights. */
  CHECK(csdkit_store_open(argv[1], &spec, &layout, &store));
  CHECK(csdkit_store_step(store, &step));
  CHECK(csdkit_state_export(store, CSDKIT_STATE_THETA, theta, N_TENSORS));
  for (t = 0; t < N_TENSORS; ++t) sum = fnv1a(sum, theta[t], numels[t] * sizeof *theta[t]);
  printf("committed step %lld, theta checksum (FNV-1a) %016llx, head.weight[0] = %.9g\n",
         (long long)step, (unsigned long long)sum, (double)theta[2][0]);
  CHECK(csdkit_store_close(store));

  for (t = 0; t < N_TENSORS; ++t) {
    free(weights[t]);
    free(grads[t]);
    free(theta[t]);
  }
  free(packed);
  return step == 3 ? 0 : 1;
}
