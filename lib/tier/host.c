/* host.c — the host tier: the GPU's nearest NUMA node from hwloc (or sysfs), the placement policy, staging
 * buffers bound to that node, and the host-cap books.
 * Threading: open/close from one thread; node/reserve/release are lock-free atomics, the rest read-only. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

#ifdef HAVE_HWLOC
#include <hwloc.h>
#endif

#include "core/core.h"
#include "tier/host.h"

struct hoff__host_tier {
    int policy;                           /* enum hoff__numa_policy */
    int nearest;                          /* the GPU's nearest node, -1 = unknown */
    int n_rot, rot[HOFF__HOST_MAX_NODES]; /* the nodes node() rotates over */
    int n_gpu, gpu[HOFF__HOST_MAX_NODES]; /* every node local to the GPU, ascending */
    int n_all, all[HOFF__HOST_MAX_NODES]; /* every (non-GPU-memory) node known, ascending */
    int numa_known;                       /* the OS reported NUMA nodes (not one made-up node) */
    int bind_node;                        /* staging buffers go here, -1 = unbound */
    int thissystem;                       /* the topology is this machine's: binding means something */
    unsigned rr;                          /* rotation counter (atomic) */
    uint64_t cap, used, peak;             /* host cap books (atomic) */
    char busid[32];                       /* the GPU as given, "" = none */
    char reason[192];                     /* why nearest is -1, "" if it is not */
#ifdef HAVE_HWLOC
    hwloc_topology_t topo; /* NULL if it could not be loaded */
#endif
};

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static int contains(const int *v, int n, int x) {
    for (int i = 0; i < n; i++)
        if (v[i] == x)
            return 1;
    return 0;
}

static void list_str(const int *v, int n, char *buf, size_t len) {
    size_t off = 0;

    buf[0] = '\0';
    for (int i = 0; i < n && off < len; i++) {
        int w = snprintf(buf + off, len - off, "%s%d", i ? "," : "", v[i]);
        if (w < 0)
            break;
        off += (size_t)w;
    }
}

/* "0,2", "0-3,6" -> nodes (order kept).  -EINVAL on anything else, duplicates included. */
static int parse_list(const char *s, int *nodes, int *n) {
    const char *p = s;

    *n = 0;
    if (!*p)
        return -EINVAL;
    for (;;) {
        char *end;
        long a, b;

        if (!isdigit((unsigned char)*p))
            return -EINVAL;
        a = strtol(p, &end, 10);
        p = end;
        b = a;
        if (*p == '-') {
            p++;
            if (!isdigit((unsigned char)*p))
                return -EINVAL;
            b = strtol(p, &end, 10);
            p = end;
        }
        if (a > 65535 || b > 65535 || b < a)
            return -EINVAL;
        for (long i = a; i <= b; i++) {
            if (*n >= HOFF__HOST_MAX_NODES || contains(nodes, *n, (int)i))
                return -EINVAL;
            nodes[(*n)++] = (int)i;
        }
        if (*p == '\0')
            return 0;
        if (*p != ',')
            return -EINVAL;
        p++;
    }
}

static int bad_policy(const char *policy, const char *why) {
    return hoff__error(-EINVAL,
                       "HOFF_NUMA=\"%s\": %s; accepted: nearest, interleave, or a list of NUMA node numbers "
                       "like 0,2 or 0-3",
                       policy, why);
}

/* "0000:41:00.0" / "00000000:41:00.0" / "41:00.0" -> the four numbers. */
static int parse_busid(const char *s, unsigned *dom, unsigned *bus, unsigned *dev, unsigned *fn) {
    int used = 0;

    if (sscanf(s, "%x:%x:%x.%x%n", dom, bus, dev, fn, &used) == 4 && s[used] == '\0')
        return 0;
    *dom = 0;
    if (sscanf(s, "%x:%x.%x%n", bus, dev, fn, &used) == 3 && s[used] == '\0')
        return 0;
    return -EINVAL;
}

/* A small text file's first line as an int (-1 on any failure or a negative value in it). */
static int read_int_file(const char *path) {
    FILE *f = fopen(path, "r");
    int v = -1;

    if (!f)
        return -1;
    if (fscanf(f, "%d", &v) != 1)
        v = -1;
    fclose(f);
    return v;
}

/* /sys/devices/system/node/online ("0-1") -> the nodes; 0 nodes if absent. */
static void sysfs_nodes(struct hoff__host_tier *t) {
    char line[512];
    FILE *f = fopen("/sys/devices/system/node/online", "r");
    size_t l;

    if (!f)
        return;
    if (fgets(line, sizeof line, f)) {
        l = strlen(line);
        while (l && isspace((unsigned char)line[l - 1]))
            line[--l] = '\0';
        if (parse_list(line, t->all, &t->n_all) < 0)
            t->n_all = 0;
    }
    fclose(f);
    qsort(t->all, (size_t)t->n_all, sizeof(int), cmp_int);
    t->numa_known = t->n_all > 0;
}

/* The kernel's word on a PCI device's node (this machine only): -1 if it has none. */
static int sysfs_gpu_node(unsigned dom, unsigned bus, unsigned dev, unsigned fn) {
    char path[128];

    snprintf(path, sizeof path, "/sys/bus/pci/devices/%04x:%02x:%02x.%x/numa_node", dom, bus, dev, fn);
    return read_int_file(path);
}

static void no_preference(struct hoff__host_tier *t, const char *fmt, const char *arg) {
    snprintf(t->reason, sizeof t->reason, fmt, arg);
    t->nearest = -1;
    t->n_gpu = 0;
}

#ifdef HAVE_HWLOC
static int is_gpu_memory(hwloc_obj_t o) {
    return o->subtype && strcasecmp(o->subtype, "GPUMemory") == 0;
}

static int load_topology(struct hoff__host_tier *t, const char *xml) {
    unsigned long flags = 0;
    hwloc_obj_t o = NULL;
    int err;

    if (hwloc_topology_init(&t->topo) < 0) {
        t->topo = NULL;
        return -ENOMEM;
    }
    hwloc_topology_set_io_types_filter(t->topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
#if HWLOC_API_VERSION >= 0x00020100
    /* The Linux backend reads PCI from sysfs by itself; the libpciaccess plugin adds nothing but a leak per load,
     * and the GPU plugins would initialise GPU runtimes (OpenCL, CUDA, ...) inside hoff. */
    hwloc_topology_set_components(t->topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "pci");
    hwloc_topology_set_components(t->topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "opencl");
    hwloc_topology_set_components(t->topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "gl");
    hwloc_topology_set_components(t->topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "cuda");
    hwloc_topology_set_components(t->topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "nvml");
    hwloc_topology_set_components(t->topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "rsmi");
    hwloc_topology_set_components(t->topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "levelzero");
#endif
    if (xml) {
        if (hwloc_topology_set_xml(t->topo, xml) < 0) {
            err = errno ? -errno : -EINVAL;
            goto fail;
        }
#if HWLOC_API_VERSION >= 0x00020300
        flags |= HWLOC_TOPOLOGY_FLAG_IMPORT_SUPPORT;
#endif
    }
    hwloc_topology_set_flags(t->topo, flags);
    if (hwloc_topology_load(t->topo) < 0) {
        err = errno ? -errno : -EINVAL;
        goto fail;
    }
    t->thissystem = hwloc_topology_is_thissystem(t->topo);
    while ((o = hwloc_get_next_obj_by_type(t->topo, HWLOC_OBJ_NUMANODE, o)) != NULL) {
        if (is_gpu_memory(o) || t->n_all >= HOFF__HOST_MAX_NODES)
            continue;
        t->all[t->n_all++] = (int)o->os_index;
    }
    qsort(t->all, (size_t)t->n_all, sizeof(int), cmp_int);
    {
        const struct hwloc_topology_support *sup = hwloc_topology_get_support(t->topo);
        t->numa_known = t->n_all > 1 || (t->n_all == 1 && sup && sup->discovery && sup->discovery->numa);
    }
    return 0;
fail:
    hwloc_topology_destroy(t->topo);
    t->topo = NULL;
    return err;
}

/* The GPU's local nodes from hwloc.  0 found (t->gpu filled), -ENOENT not in the topology, -ERANGE local
 * to every node (attached to the machine as a whole). */
static int hwloc_gpu_nodes(struct hoff__host_tier *t, unsigned dom, unsigned bus, unsigned dev, unsigned fn) {
    hwloc_obj_t pci = hwloc_get_pcidev_by_busid(t->topo, dom, bus, dev, fn), anc, o = NULL;

    if (!pci)
        return -ENOENT;
    anc = hwloc_get_non_io_ancestor_obj(t->topo, pci);
    if (!anc || !anc->nodeset)
        return -ERANGE;
    t->n_gpu = 0;
    while ((o = hwloc_get_next_obj_by_type(t->topo, HWLOC_OBJ_NUMANODE, o)) != NULL)
        if (!is_gpu_memory(o) && hwloc_bitmap_isset(anc->nodeset, o->os_index) && t->n_gpu < HOFF__HOST_MAX_NODES)
            t->gpu[t->n_gpu++] = (int)o->os_index;
    qsort(t->gpu, (size_t)t->n_gpu, sizeof(int), cmp_int);
    if (t->n_gpu == 0 || (t->n_all > 1 && t->n_gpu >= t->n_all)) {
        t->n_gpu = 0;
        return -ERANGE;
    }
    return 0;
}
#endif

static void find_nearest(struct hoff__host_tier *t, const char *xml) {
    unsigned dom, bus, dev, fn;
    int rc = -ENOENT, node;

    t->nearest = -1;
    if (!t->busid[0]) {
        no_preference(t, "%sno GPU was given", "");
        return;
    }
    if (parse_busid(t->busid, &dom, &bus, &dev, &fn) < 0) {
        no_preference(t, "\"%s\" is not a PCI bus id", t->busid);
        HOFF__LOG_ONCE(HOFF_LOG_WARN, "host tier: %s: evictions go to any host node", t->reason);
        return;
    }
    if (!t->numa_known) {
        no_preference(t, "%sno NUMA information on this machine (one node, or none reported)", "");
        HOFF__LOG_ONCE(HOFF_LOG_INFO, "host tier: %s: evictions go to any host node", t->reason);
        return;
    }
#ifdef HAVE_HWLOC
    if (t->topo)
        rc = hwloc_gpu_nodes(t, dom, bus, dev, fn);
#endif
    if (rc == 0) {
        t->nearest = t->gpu[0];
        return;
    }
    if (!xml) { /* the kernel may know what hwloc did not see */
        node = sysfs_gpu_node(dom, bus, dev, fn);
        if (node >= 0 && (t->n_all == 0 || contains(t->all, t->n_all, node))) {
            t->gpu[0] = node;
            t->n_gpu = 1;
            t->nearest = node;
            return;
        }
    }
    if (rc == -ERANGE)
        no_preference(t, "GPU %s is local to every NUMA node (hwloc attaches it to the whole machine)", t->busid);
    else
        no_preference(t, "GPU %s is not in the topology (hwloc and sysfs do not know its node)", t->busid);
    HOFF__LOG_ONCE(HOFF_LOG_WARN, "host tier: %s: evictions go to any host node", t->reason);
}

int hoff__host_tier_open(struct hoff__host_tier **out, const char *policy, const char *pci_busid, const char *topo_xml,
                         uint64_t cap_bytes) {
    struct hoff__host_tier *t;
    char pol[64], have[256], *s, *e;
    int rc;

    *out = NULL;
    if (!policy)
        policy = "";
    if (strlen(policy) >= sizeof pol)
        return bad_policy(policy, "too long");
    strcpy(pol, policy);
    for (s = pol; isspace((unsigned char)*s); s++)
        ;
    for (e = s + strlen(s); e > s && isspace((unsigned char)e[-1]); e--)
        *(e - 1) = '\0';
    if (pci_busid && strlen(pci_busid) >= 32)
        return hoff__error(-EINVAL, "PCI bus id \"%.40s...\" is too long", pci_busid);

    t = calloc(1, sizeof *t);
    if (!t)
        return -ENOMEM;
    t->cap = cap_bytes;
    t->bind_node = -1;
    t->nearest = -1;
    if (pci_busid)
        strcpy(t->busid, pci_busid);

    if (!*s || strcasecmp(s, "nearest") == 0) {
        t->policy = HOFF__NUMA_NEAREST;
    } else if (strcasecmp(s, "interleave") == 0) {
        t->policy = HOFF__NUMA_INTERLEAVE;
    } else {
        t->policy = HOFF__NUMA_LIST;
        if (parse_list(s, t->rot, &t->n_rot) < 0) {
            free(t);
            return bad_policy(policy, "not a policy nor a node list (duplicates are not allowed)");
        }
    }

#ifdef HAVE_HWLOC
    rc = load_topology(t, topo_xml);
    if (rc < 0 && topo_xml) {
        free(t);
        return hoff__error(rc, "cannot load the hwloc topology %s (%s)", topo_xml, strerror(-rc));
    }
    if (rc < 0)
        HOFF__LOG_ONCE(HOFF_LOG_WARN,
                       "host tier: hwloc could not read this machine's topology (%s); "
                       "using sysfs for NUMA placement",
                       strerror(-rc));
#else
    if (topo_xml) {
        free(t);
        return hoff__error(-ENOTSUP, "cannot load %s: hoff was built without hwloc", topo_xml);
    }
#endif
    if (!topo_xml && t->n_all == 0) { /* no hwloc, or hwloc failed: ask the kernel */
        sysfs_nodes(t);
        t->thissystem = 1;
    }

    find_nearest(t, topo_xml);

    if (t->policy == HOFF__NUMA_LIST) {
        for (int i = 0; i < t->n_rot; i++) {
            if (t->n_all > 0 && !contains(t->all, t->n_all, t->rot[i])) {
                char why[384];

                list_str(t->all, t->n_all, have, sizeof have);
                snprintf(why, sizeof why, "NUMA node %d does not exist (this machine has node%s %s)", t->rot[i],
                         t->n_all > 1 ? "s" : "", have);
                rc = bad_policy(policy, why);
                hoff__host_tier_close(t);
                return rc;
            }
        }
        t->bind_node = t->nearest >= 0 && contains(t->rot, t->n_rot, t->nearest) ? t->nearest : t->rot[0];
    } else if (t->policy == HOFF__NUMA_INTERLEAVE) {
        if (t->numa_known) {
            memcpy(t->rot, t->all, sizeof(int) * (size_t)t->n_all);
            t->n_rot = t->n_all;
        } else {
            HOFF__LOG_ONCE(HOFF_LOG_INFO, "host tier: interleave: no NUMA information on this machine; "
                                          "evictions go to any host node");
        }
        t->bind_node = t->nearest;
    } else {
        if (t->nearest >= 0) {
            t->rot[0] = t->nearest;
            t->n_rot = 1;
        }
        t->bind_node = t->nearest;
    }
    *out = t;
    return 0;
}

void hoff__host_tier_close(struct hoff__host_tier *t) {
    if (!t)
        return;
#ifdef HAVE_HWLOC
    if (t->topo)
        hwloc_topology_destroy(t->topo);
#endif
    free(t);
}

int hoff__host_tier_node(struct hoff__host_tier *t) {
    unsigned i;

    if (t->policy == HOFF__NUMA_NEAREST || t->n_rot <= 1)
        return t->n_rot ? t->rot[0] : -1;
    i = __atomic_fetch_add(&t->rr, 1, __ATOMIC_RELAXED);
    return t->rot[i % (unsigned)t->n_rot];
}

int hoff__host_tier_nearest(const struct hoff__host_tier *t) {
    return t->nearest;
}

int hoff__host_tier_nodes(const struct hoff__host_tier *t, int *out, int max) {
    for (int i = 0; i < t->n_rot && i < max; i++)
        out[i] = t->rot[i];
    return t->n_rot;
}

int hoff__host_tier_gpu_nodes(const struct hoff__host_tier *t, int *out, int max) {
    for (int i = 0; i < t->n_gpu && i < max; i++)
        out[i] = t->gpu[i];
    return t->n_gpu;
}

int hoff__host_tier_policy(const struct hoff__host_tier *t) {
    return t->policy;
}

const char *hoff__host_tier_reason(const struct hoff__host_tier *t) {
    return t->reason;
}

const char *hoff__host_tier_describe(const struct hoff__host_tier *t, char *buf, size_t len) {
    char rot[256], gpu[256], near[320];

    list_str(t->rot, t->n_rot, rot, sizeof rot);
    list_str(t->gpu, t->n_gpu, gpu, sizeof gpu);
    if (t->nearest >= 0)
        snprintf(near, sizeof near, "GPU %s is local to node%s %s", t->busid, t->n_gpu > 1 ? "s" : "", gpu);
    else
        snprintf(near, sizeof near, "no nearest node: %s", t->reason);
    switch (t->policy) {
    case HOFF__NUMA_INTERLEAVE:
        if (t->n_rot)
            snprintf(buf, len, "interleave over nodes %s (%s)", rot, near);
        else
            snprintf(buf, len, "interleave: no preference (no NUMA information)");
        break;
    case HOFF__NUMA_LIST: snprintf(buf, len, "node%s %s as listed (%s)", t->n_rot > 1 ? "s" : "", rot, near); break;
    default:
        if (t->nearest >= 0)
            snprintf(buf, len, "nearest: node %d (%s)", t->nearest, near);
        else
            snprintf(buf, len, "nearest: no preference (%s)", t->reason);
        break;
    }
    return buf;
}

/* --- staging buffers -------------------------------------------------- */

void *hoff__host_tier_staging_alloc(struct hoff__host_tier *t, size_t bytes, int *bound_node) {
    size_t len = (size_t)hoff__align_up(bytes ? bytes : 1, 4096);
    void *p;
    int node = -1;

    if (bound_node)
        *bound_node = -1;
    p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        errno = ENOMEM;
        return NULL;
    }
    if (t && t->bind_node >= 0 && t->thissystem) {
#ifdef HAVE_HWLOC
        if (t->topo) {
            hwloc_nodeset_t ns = hwloc_bitmap_alloc();

            if (ns) {
                hwloc_bitmap_only(ns, (unsigned)t->bind_node);
                if (hwloc_set_area_membind(t->topo, p, len, ns, HWLOC_MEMBIND_BIND, HWLOC_MEMBIND_BYNODESET) == 0)
                    node = t->bind_node;
                else
                    HOFF__LOG_ONCE(HOFF_LOG_WARN,
                                   "host tier: cannot bind staging buffers to NUMA node %d (%s); "
                                   "they stay where the kernel puts them",
                                   t->bind_node, strerror(errno));
                hwloc_bitmap_free(ns);
            }
        }
#else
        HOFF__LOG_ONCE(HOFF_LOG_INFO, "host tier: built without hwloc: staging buffers are not bound to node %d",
                       t->bind_node);
#endif
    }
    /* Pin (and so place) the pages now; where the memlock limit refuses, touch them instead. */
    if (mlock(p, len) != 0) {
        HOFF__LOG_ONCE(HOFF_LOG_INFO,
                       "host tier: cannot mlock staging buffers (%s; see ulimit -l): "
                       "they stay pageable until the backend pins them",
                       strerror(errno));
        memset(p, 0, len);
    }
    if (bound_node)
        *bound_node = node;
    return p;
}

void hoff__host_tier_staging_free(struct hoff__host_tier *t, void *p, size_t bytes) {
    size_t len = (size_t)hoff__align_up(bytes ? bytes : 1, 4096);

    if (!p)
        return;
    munlock(p, len);
    munmap(p, len);
}

/* --- the host cap ----------------------------------------------------- */

int hoff__host_tier_reserve(struct hoff__host_tier *t, uint64_t bytes) {
    uint64_t cur = __atomic_load_n(&t->used, __ATOMIC_RELAXED), peak;

    do {
        if (t->cap && (bytes > t->cap || cur > t->cap - bytes))
            return -ENOSPC;
    } while (!__atomic_compare_exchange_n(&t->used, &cur, cur + bytes, 1, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED));
    cur += bytes;
    peak = __atomic_load_n(&t->peak, __ATOMIC_RELAXED);
    while (cur > peak && !__atomic_compare_exchange_n(&t->peak, &peak, cur, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
    return 0;
}

void hoff__host_tier_release(struct hoff__host_tier *t, uint64_t bytes) {
    uint64_t cur = __atomic_load_n(&t->used, __ATOMIC_RELAXED), next;

    do {
        next = cur >= bytes ? cur - bytes : 0;
    } while (!__atomic_compare_exchange_n(&t->used, &cur, next, 1, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED));
    if (cur < bytes)
        HOFF__LOG_ONCE(HOFF_LOG_ERROR, "host tier: released more bytes than were reserved (a bug in hoff)");
}

uint64_t hoff__host_tier_used(const struct hoff__host_tier *t) {
    return __atomic_load_n(&t->used, __ATOMIC_RELAXED);
}

uint64_t hoff__host_tier_peak(const struct hoff__host_tier *t) {
    return __atomic_load_n(&t->peak, __ATOMIC_RELAXED);
}

uint64_t hoff__host_tier_cap(const struct hoff__host_tier *t) {
    return t->cap;
}
