/* memstats.h — torch.c's counters behind torch.cuda.memory_stats (memstats.c).  Threading: any thread. */
#ifndef HOFF_TORCH_MEMSTATS_H
#define HOFF_TORCH_MEMSTATS_H

#include <stddef.h>

#define HOFF__TORCH_MAX_DEVICES 64 /* devices 0..63: PyTorch's allocator entry points serve these */

/* A block of `block` bytes handed out for `requested` bytes on device, and its free. */
void hoff__torch_stats_alloc(int device, size_t requested, size_t block);
void hoff__torch_stats_free(int device, size_t requested, size_t block);
/* An allocation PyTorch will report as out of memory. */
void hoff__torch_stats_oom(int device);
/* Every peak becomes its current value (torch.cuda.reset_peak_memory_stats). */
void hoff__torch_stats_reset_peaks(int device);

#endif
