/* options.h — checking a whole struct hoff_config against the option table (options.c).
 * Threading: pure; reads only the caller's struct. */
#ifndef HOFF_OPTIONS_H
#define HOFF_OPTIONS_H

#include <stddef.h>

#include "hoff.h"

/* Every GB/s rate hoff takes (the HOFF_*_GBPS options, the tools' --bandwidth):
 * 1 MB/s to 100 TB/s.  Slower would take the virtual clock past the longest
 * step hoff models on ordinary blocks; faster is surely a typo. */
#define HOFF__GBPS_MIN 0.001
#define HOFF__GBPS_MAX 100000.0

/* 0 when cfg has the right version and size, every field is in its range and
 * the fields agree with each other; else -EINVAL with a message naming the
 * field, its variable and the accepted range (into err if non-NULL, and as
 * the thread's last error).  hoff_init calls it on every config. */
int hoff__config_validate(const struct hoff_config *cfg, char *err, size_t errlen);

#endif
