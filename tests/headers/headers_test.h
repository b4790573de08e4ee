/* The header compile tests: each use_*.c includes one klaunch header first
 * (so the header must stand alone) and exercises its inline code; impl.c
 * holds the runtime's implementation; main.c runs them all. The same files
 * are compiled as C99, as C++17 (copies named .cc) and through nvcc. */
#ifndef KLAUNCH_TESTS_HEADERS_HEADERS_TEST_H
#define KLAUNCH_TESTS_HEADERS_HEADERS_TEST_H

/* Each returns 0 on success, else a kl_status (or 100 + a check number). */
int kl_headers_use_klaunch(void);
int kl_headers_use_record_backend(void);
int kl_headers_use_cuda_backend(void);
int kl_headers_use_cuda_helpers(void);
int kl_headers_use_image(void);
int kl_headers_use_tensor_map(void);
int kl_headers_use_mla_prefill(void);
int kl_headers_use_paged_decode(void);
int kl_headers_use_paged_decode_split(void);
int kl_headers_use_mla_prefill_grid(void);
int kl_headers_use_all(void);

#endif
