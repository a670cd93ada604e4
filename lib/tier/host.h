/* host.h — the host tier: which NUMA node(s) evicted blocks and staging buffers go to (hwloc), and the host cap.
 * Threading: open/close from one thread; every other call is thread safe (atomics; the topology is read-only
 * after open). */
#ifndef HOFF_TIER_HOST_H
#define HOFF_TIER_HOST_H

#include <stddef.h>
#include <stdint.h>

/* Placement policy (cfg.numa / HOFF_NUMA). */
enum hoff__numa_policy {
    HOFF__NUMA_NEAREST = 0,    /* "nearest" (or ""): the node nearest the GPU, always */
    HOFF__NUMA_INTERLEAVE = 1, /* "interleave": rotate over every node of the machine */
    HOFF__NUMA_LIST = 2,       /* "0,2" or "0-3,6": rotate over the nodes listed */
};

#define HOFF__HOST_MAX_NODES 256 /* nodes a policy can name or rotate over */

struct hoff__host_tier;

/* Open the host tier.
 *   policy:   cfg.numa: "nearest" | "interleave" | a node list "0,2", "0-3,6" (NULL or "" = nearest).
 *   pci_busid: the GPU's PCI bus id, "0000:41:00.0" or "00000000:41:00.0" as cudaDeviceGetPCIBusId
 *             writes it; NULL = no GPU known (nearest then has no preference).
 *   topo_xml: an hwloc XML topology to use instead of this machine (tests); NULL = this machine.
 *   cap_bytes: the host cap (cfg.host_cap_bytes), 0 = no limit.
 * The GPU's nearest node comes from hwloc (the PCI device's non-I/O ancestor's nodeset; I/O discovery is on),
 * else, on this machine only, from /sys/bus/pci/devices/ID/numa_node.  When neither knows (built without
 * hwloc, one made-up NUMA node, GPU not found, a GPU local to every node) nearest is -1 ("no preference") and
 * the reason is logged once and kept for hoff__host_tier_describe.
 * Returns 0, -EINVAL for a bad policy (message names HOFF_NUMA and the accepted forms, and a node that does not
 * exist), -ENOMEM. */
int hoff__host_tier_open(struct hoff__host_tier **out, const char *policy, const char *pci_busid, const char *topo_xml,
                         uint64_t cap_bytes);
void hoff__host_tier_close(struct hoff__host_tier *t);

/* The node the next eviction should target (host-NUMA location id), -1 = no preference (use plain host
 * memory).  nearest: fixed; interleave: rotates over every node; list: rotates over the list. */
int hoff__host_tier_node(struct hoff__host_tier *t);

/* The GPU's nearest node (what nearest targets), -1 if unknown.  Independent of the policy. */
int hoff__host_tier_nearest(const struct hoff__host_tier *t);

/* The nodes evictions rotate over (nearest: the one nearest node), in order, into out[0..max).  Returns how
 * many there are (may exceed max); 0 when there is no preference. */
int hoff__host_tier_nodes(const struct hoff__host_tier *t, int *out, int max);

/* Every node local to the GPU (a GPU under a package with two sub-NUMA nodes has two), ascending.  Returns the
 * count (may exceed max); 0 when unknown. */
int hoff__host_tier_gpu_nodes(const struct hoff__host_tier *t, int *out, int max);

/* enum hoff__numa_policy */
int hoff__host_tier_policy(const struct hoff__host_tier *t);

/* One line for logs and reports: "nearest: node 1 (GPU 0000:41:00.0 is local to node 1)", or with the reason
 * there is no preference.  Returns buf. */
const char *hoff__host_tier_describe(const struct hoff__host_tier *t, char *buf, size_t len);

/* Why there is no preference ("" when there is one). */
const char *hoff__host_tier_reason(const struct hoff__host_tier *t);

/* Staging buffers: page-aligned (4096) host memory of `bytes`, bound (HWLOC_MEMBIND_BIND) to the GPU's nearest
 * node (or, without one, the first node of an explicit list) when the topology is this machine's, and mlock()ed
 * best effort (a failure is said once).  t may be NULL: plain aligned memory.  *bound_node (may be NULL) gets the
 * node the memory was bound to, or -1.  NULL on failure (errno set).  Free with hoff__host_tier_staging_free and
 * the same bytes. */
void *hoff__host_tier_staging_alloc(struct hoff__host_tier *t, size_t bytes, int *bound_node);
void hoff__host_tier_staging_free(struct hoff__host_tier *t, void *p, size_t bytes);

/* Host-cap accounting.  reserve: 0, or -ENOSPC (nothing taken) when used + bytes would exceed the cap (a cap
 * of 0 never refuses).  release gives bytes back (releasing more than is used is a bug: clamped to 0 and
 * logged).  Lock-free. */
int hoff__host_tier_reserve(struct hoff__host_tier *t, uint64_t bytes);
void hoff__host_tier_release(struct hoff__host_tier *t, uint64_t bytes);
uint64_t hoff__host_tier_used(const struct hoff__host_tier *t);
uint64_t hoff__host_tier_peak(const struct hoff__host_tier *t);
uint64_t hoff__host_tier_cap(const struct hoff__host_tier *t);

#endif
