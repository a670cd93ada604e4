/* test_host_tier.c — the host tier on synthetic hwloc topologies (tests/data/topologies): the node chosen for
 * each GPU, interleave and list rotation, bad lists, the fallbacks, staging buffers and the host-cap books.
 * Threading: single-threaded except the concurrent reserve/release test. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "testutil.h"
#include "tier/host.h"

#ifndef HOFF_TOPO_DIR
#define HOFF_TOPO_DIR "tests/data/topologies"
#endif

/* The directory of the topologies: $srcdir's when there is one, else the one compiled in. */
static const char *topo_dir(void) {
    static char dir[1024];
    const char *srcdir = getenv("srcdir");

    if (srcdir) {
        snprintf(dir, sizeof dir, "%s/tests/data/topologies", srcdir);
        if (access(dir, R_OK) == 0)
            return dir;
    }
    return HOFF_TOPO_DIR;
}

static const char *topo(const char *name) {
    static char path[1280];

    snprintf(path, sizeof path, "%s/%s", topo_dir(), name);
    return path;
}

/* Open on an XML topology; NULL (and the test passes trivially) when built without hwloc. */
static struct hoff__host_tier *open_xml(const char *policy, const char *busid, const char *xml) {
    struct hoff__host_tier *t = NULL;
    int rc = hoff__host_tier_open(&t, policy, busid, topo(xml), 0);

#ifdef HAVE_HWLOC
    CU_ASSERT_EQUAL(rc, 0);
    if (rc)
        fprintf(stderr, "open(%s, %s, %s): %s\n", policy, busid ? busid : "NULL", xml, hoff_last_error());
#else
    CU_ASSERT_EQUAL(rc, -ENOTSUP);
#endif
    return t;
}

/* The nearest node for one GPU of one topology (-2 when there is no hwloc to ask). */
static int nearest_of(const char *xml, const char *busid) {
    struct hoff__host_tier *t = open_xml("nearest", busid, xml);
    int n;

    if (!t)
        return -2;
    n = hoff__host_tier_node(t);
    CU_ASSERT_EQUAL(n, hoff__host_tier_nearest(t));
    CU_ASSERT_EQUAL(hoff__host_tier_node(t), n); /* fixed */
    CU_ASSERT_EQUAL(hoff__host_tier_node(t), n);
    hoff__host_tier_close(t);
    return n;
}

#ifdef HAVE_HWLOC
#define EXPECT_NODE(xml, busid, node) CU_ASSERT_EQUAL(nearest_of(xml, busid), node)
#else
#define EXPECT_NODE(xml, busid, node) CU_ASSERT_EQUAL(nearest_of(xml, busid), -2)
#endif

static void test_two_sockets_gpu_on_socket1(void) {
    struct hoff__host_tier *t;
    int nodes[8], n;
    char buf[256];

    EXPECT_NODE("two-sockets-gpu1.xml", "0000:41:00.0", 1);
    EXPECT_NODE("two-sockets-gpu1.xml", "00000000:41:00.0", 1); /* as nvidia-smi writes it */
    EXPECT_NODE("two-sockets-gpu1.xml", "41:00.0", 1);
    EXPECT_NODE("two-sockets-gpu1.xml", "0000:01:00.0", 0); /* the NIC, on socket 0 */
    t = open_xml("nearest", "0000:41:00.0", "two-sockets-gpu1.xml");
    if (!t)
        return;
    CU_ASSERT_EQUAL(hoff__host_tier_policy(t), HOFF__NUMA_NEAREST);
    n = hoff__host_tier_gpu_nodes(t, nodes, 8);
    CU_ASSERT_EQUAL(n, 1);
    CU_ASSERT_EQUAL(nodes[0], 1);
    n = hoff__host_tier_nodes(t, nodes, 8);
    CU_ASSERT_EQUAL(n, 1);
    CU_ASSERT_EQUAL(nodes[0], 1);
    CU_ASSERT_STRING_EQUAL(hoff__host_tier_reason(t), "");
    hoff__host_tier_describe(t, buf, sizeof buf);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "nearest: node 1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "0000:41:00.0"));
    hoff__host_tier_close(t);
}

static void test_one_socket(void) {
    EXPECT_NODE("one-socket.xml", "0000:17:00.0", 0);
}

static void test_no_numa_information(void) {
    struct hoff__host_tier *t;
    int nodes[4];
    char buf[256];

    EXPECT_NODE("no-numa.xml", "0000:3b:00.0", -1);
    t = open_xml("nearest", "0000:3b:00.0", "no-numa.xml");
    if (!t)
        return;
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff__host_tier_reason(t), "no NUMA information"));
    CU_ASSERT_EQUAL(hoff__host_tier_nodes(t, nodes, 4), 0);
    CU_ASSERT_EQUAL(hoff__host_tier_gpu_nodes(t, nodes, 4), 0);
    hoff__host_tier_describe(t, buf, sizeof buf);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "no preference"));
    hoff__host_tier_close(t);
    /* interleave has nothing to rotate over either */
    t = open_xml("interleave", "0000:3b:00.0", "no-numa.xml");
    CU_ASSERT_EQUAL(hoff__host_tier_node(t), -1);
    CU_ASSERT_EQUAL(hoff__host_tier_node(t), -1);
    CU_ASSERT_EQUAL(hoff__host_tier_nodes(t, nodes, 4), 0);
    hoff__host_tier_close(t);
    /* an explicit list is taken as given: node 0 exists (the one hwloc made up) */
    t = open_xml("0", "0000:3b:00.0", "no-numa.xml");
    CU_ASSERT_EQUAL(hoff__host_tier_node(t), 0);
    hoff__host_tier_close(t);
}

static void test_several_gpus(void) {
    struct hoff__host_tier *t;
    int nodes[8], n;

    EXPECT_NODE("multi-gpu.xml", "0000:18:00.0", 0); /* sub-NUMA cluster 0 of package 0 */
    EXPECT_NODE("multi-gpu.xml", "0000:2a:00.0", 1); /* sub-NUMA cluster 1 of package 0 */
    EXPECT_NODE("multi-gpu.xml", "0000:9b:00.0", 2); /* package 1, behind a switch: nodes 2,3 */
    EXPECT_NODE("multi-gpu.xml", "0000:ab:00.0", 2);
    EXPECT_NODE("multi-gpu.xml", "0000:c1:00.0", -1); /* attached to the machine: every node */
    t = open_xml("nearest", "0000:ab:00.0", "multi-gpu.xml");
    if (!t)
        return;
    n = hoff__host_tier_gpu_nodes(t, nodes, 8);
    CU_ASSERT_EQUAL(n, 2);
    CU_ASSERT_EQUAL(nodes[0], 2);
    CU_ASSERT_EQUAL(nodes[1], 3);
    hoff__host_tier_close(t);
    t = open_xml("nearest", "0000:c1:00.0", "multi-gpu.xml");
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff__host_tier_reason(t), "every NUMA node"));
    hoff__host_tier_close(t);
}

/* An 8-GPU node on two sockets (issue 20): each rank's GPU -> its own socket's node. */
static void test_eight_gpus(void) {
    char bus[16];

    for (int d = 0; d < 8; d++) {
        snprintf(bus, sizeof bus, "0000:%02x:00.0", 0x10 + d);
        EXPECT_NODE("eight-gpus.xml", bus, d / 4);
    }
}

static void test_gpu_not_found(void) {
    struct hoff__host_tier *t;

    EXPECT_NODE("two-sockets-gpu1.xml", "0000:99:00.0", -1);
    t = open_xml("nearest", "0000:99:00.0", "two-sockets-gpu1.xml");
    if (!t)
        return;
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff__host_tier_reason(t), "not in the topology"));
    hoff__host_tier_close(t);
    t = open_xml("nearest", NULL, "two-sockets-gpu1.xml");
    CU_ASSERT_EQUAL(hoff__host_tier_node(t), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff__host_tier_reason(t), "no GPU"));
    hoff__host_tier_close(t);
    t = open_xml("nearest", "not-a-bus-id", "two-sockets-gpu1.xml");
    CU_ASSERT_EQUAL(hoff__host_tier_node(t), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff__host_tier_reason(t), "not a PCI bus id"));
    hoff__host_tier_close(t);
}

static void test_interleave(void) {
    struct hoff__host_tier *t = open_xml("interleave", "0000:41:00.0", "two-sockets-gpu1.xml");
    int nodes[8], seen[4] = {0};

    if (!t)
        return;
    CU_ASSERT_EQUAL(hoff__host_tier_policy(t), HOFF__NUMA_INTERLEAVE);
    CU_ASSERT_EQUAL(hoff__host_tier_node(t), 0);
    CU_ASSERT_EQUAL(hoff__host_tier_node(t), 1);
    CU_ASSERT_EQUAL(hoff__host_tier_node(t), 0);
    CU_ASSERT_EQUAL(hoff__host_tier_node(t), 1);
    CU_ASSERT_EQUAL(hoff__host_tier_nearest(t), 1); /* still known */
    hoff__host_tier_close(t);

    t = open_xml(" Interleave ", NULL, "multi-gpu.xml");
    CU_ASSERT_EQUAL(hoff__host_tier_nodes(t, nodes, 8), 4);
    for (int i = 0; i < 400; i++) {
        int n = hoff__host_tier_node(t);
        CU_ASSERT_EQUAL(n, i % 4);
        if (n >= 0 && n < 4)
            seen[n]++;
    }
    for (int i = 0; i < 4; i++)
        CU_ASSERT_EQUAL(seen[i], 100);
    hoff__host_tier_close(t);
}

static void test_explicit_lists(void) {
    struct hoff__host_tier *t = open_xml("0,2", "0000:9b:00.0", "multi-gpu.xml");
    int nodes[8];
    char buf[256];

    if (!t)
        return;
    CU_ASSERT_EQUAL(hoff__host_tier_policy(t), HOFF__NUMA_LIST);
    CU_ASSERT_EQUAL(hoff__host_tier_nodes(t, nodes, 8), 2);
    CU_ASSERT_EQUAL(hoff__host_tier_node(t), 0);
    CU_ASSERT_EQUAL(hoff__host_tier_node(t), 2);
    CU_ASSERT_EQUAL(hoff__host_tier_node(t), 0);
    CU_ASSERT_EQUAL(hoff__host_tier_nearest(t), 2);
    hoff__host_tier_describe(t, buf, sizeof buf);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "0,2"));
    hoff__host_tier_close(t);

    t = open_xml("1-3", NULL, "multi-gpu.xml");
    CU_ASSERT_EQUAL(hoff__host_tier_node(t), 1);
    CU_ASSERT_EQUAL(hoff__host_tier_node(t), 2);
    CU_ASSERT_EQUAL(hoff__host_tier_node(t), 3);
    CU_ASSERT_EQUAL(hoff__host_tier_node(t), 1);
    hoff__host_tier_close(t);

    t = open_xml("3,0-1", NULL, "multi-gpu.xml"); /* order is kept */
    CU_ASSERT_EQUAL(hoff__host_tier_nodes(t, nodes, 8), 3);
    CU_ASSERT_EQUAL(nodes[0], 3);
    CU_ASSERT_EQUAL(nodes[1], 0);
    CU_ASSERT_EQUAL(nodes[2], 1);
    hoff__host_tier_close(t);

    t = open_xml(" 3 ", NULL, "multi-gpu.xml");
    CU_ASSERT_EQUAL(hoff__host_tier_node(t), 3);
    CU_ASSERT_EQUAL(hoff__host_tier_node(t), 3);
    hoff__host_tier_close(t);
}

static void test_bad_lists(void) {
    static const char *const bad[] = {"0,,2",      "a",           "-1",   "1-0", "0,0", "0-2,1", "0 2", "0,", ",0",
                                      "nearest,0", "99999999999", "near", "0x1", "1-",  "5",     "4-7", NULL};
    struct hoff__host_tier *t;

    for (int i = 0; bad[i]; i++) {
        int rc;

        t = (struct hoff__host_tier *)1;
        rc = hoff__host_tier_open(&t, bad[i], "0000:18:00.0", topo("multi-gpu.xml"), 0);
#ifdef HAVE_HWLOC
        CU_ASSERT_EQUAL(rc, -EINVAL);
        if (rc != -EINVAL)
            fprintf(stderr, "HOFF_NUMA=\"%s\" was accepted\n", bad[i]);
        CU_ASSERT_PTR_NULL(t);
        CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "HOFF_NUMA"));
#else
        CU_ASSERT(rc == -EINVAL || rc == -ENOTSUP);
#endif
        if (rc == 0)
            hoff__host_tier_close(t);
    }
#ifdef HAVE_HWLOC
    /* a node that does not exist is named, with the ones that do */
    CU_ASSERT_EQUAL(hoff__host_tier_open(&t, "0,5", NULL, topo("multi-gpu.xml"), 0), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "node 5 does not exist"));
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "0,1,2,3"));
    /* a topology file that is not there is an error, not a silent fallback */
    CU_ASSERT_NOT_EQUAL(hoff__host_tier_open(&t, "nearest", NULL, topo("no-such-topology.xml"), 0), 0);
    CU_ASSERT_PTR_NULL(t);
#endif
}

/* This machine (whatever it is): opening never fails, and the answer is consistent. */
static void test_this_machine(void) {
    struct hoff__host_tier *t;
    int nodes[HOFF__HOST_MAX_NODES], n;
    char buf[512];

    CU_ASSERT_EQUAL_FATAL(hoff__host_tier_open(&t, "nearest", NULL, NULL, 0), 0);
    CU_ASSERT_EQUAL(hoff__host_tier_node(t), -1); /* no GPU given */
    hoff__host_tier_close(t);
    /* a GPU id that does not exist here */
    CU_ASSERT_EQUAL_FATAL(hoff__host_tier_open(&t, NULL, "0000:fe:1f.7", NULL, 0), 0);
    CU_ASSERT_EQUAL(hoff__host_tier_node(t), -1);
    CU_ASSERT_STRING_NOT_EQUAL(hoff__host_tier_reason(t), "");
    hoff__host_tier_close(t);
    CU_ASSERT_EQUAL_FATAL(hoff__host_tier_open(&t, "interleave", NULL, NULL, 0), 0);
    n = hoff__host_tier_nodes(t, nodes, HOFF__HOST_MAX_NODES);
    CU_ASSERT(n >= 0);
    if (n > 0)
        CU_ASSERT_EQUAL(hoff__host_tier_node(t), nodes[0]);
    fprintf(stderr, "\n  this machine: %s\n", hoff__host_tier_describe(t, buf, sizeof buf));
    hoff__host_tier_close(t);
    /* a real PCI device of this machine: its node is the kernel's, or one of the machine's, or none */
    {
        DIR *d = opendir("/sys/bus/pci/devices");
        struct dirent *e;
        char path[512];
        int sys_node, count = 0;

        while (d && (e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.')
                continue;
            snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/numa_node", e->d_name);
            {
                FILE *f = fopen(path, "r");
                sys_node = -1;
                if (f) {
                    if (fscanf(f, "%d", &sys_node) != 1)
                        sys_node = -1;
                    fclose(f);
                }
            }
            CU_ASSERT_EQUAL_FATAL(hoff__host_tier_open(&t, "nearest", e->d_name, NULL, 0), 0);
            if (sys_node >= 0)
                CU_ASSERT_EQUAL(hoff__host_tier_nearest(t), sys_node);
            if (hoff__host_tier_nearest(t) >= 0) {
                int found = 0;
                for (int i = 0; i < n; i++)
                    found |= nodes[i] == hoff__host_tier_nearest(t);
                CU_ASSERT(found || n == 0);
            }
            fprintf(stderr, "  %s: %s\n", e->d_name, hoff__host_tier_describe(t, buf, sizeof buf));
            hoff__host_tier_close(t);
            if (++count == 16)
                break;
        }
        if (d)
            closedir(d);
    }
}

static void check_buffer(void *p, size_t bytes) {
    unsigned char *c = p;

    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL((uintptr_t)p % 4096, 0);
    memset(c, 0xA5, bytes);
    CU_ASSERT_EQUAL(c[0], 0xA5);
    CU_ASSERT_EQUAL(c[bytes - 1], 0xA5);
}

static void test_staging(void) {
    struct hoff__host_tier *t;
    void *p;
    int node = 7;

    /* no tier: plain aligned memory */
    p = hoff__host_tier_staging_alloc(NULL, 12345, &node);
    check_buffer(p, 12345);
    CU_ASSERT_EQUAL(node, -1);
    hoff__host_tier_staging_free(NULL, p, 12345);

    /* a topology that is not this machine: nothing is bound */
    t = open_xml("nearest", "0000:41:00.0", "two-sockets-gpu1.xml");
    if (t) {
        node = 7;
        p = hoff__host_tier_staging_alloc(t, 1 << 20, &node);
        check_buffer(p, 1 << 20);
        CU_ASSERT_EQUAL(node, -1);
        hoff__host_tier_staging_free(t, p, 1 << 20);
        hoff__host_tier_close(t);
    }

    /* this machine, an explicit node that exists: bound to it (with hwloc) */
    if (access("/sys/devices/system/node/node0", F_OK) == 0) {
        CU_ASSERT_EQUAL_FATAL(hoff__host_tier_open(&t, "0", NULL, NULL, 0), 0);
        p = hoff__host_tier_staging_alloc(t, 3 * 4096 + 1, &node);
        check_buffer(p, 3 * 4096 + 1);
#ifdef HAVE_HWLOC
        CU_ASSERT_EQUAL(node, 0);
#else
        CU_ASSERT_EQUAL(node, -1);
#endif
        hoff__host_tier_staging_free(t, p, 3 * 4096 + 1);
        hoff__host_tier_close(t);
    }
}

static void test_host_cap(void) {
    struct hoff__host_tier *t;

    CU_ASSERT_EQUAL_FATAL(hoff__host_tier_open(&t, "nearest", NULL, NULL, 100), 0);
    CU_ASSERT_EQUAL(hoff__host_tier_cap(t), 100);
    CU_ASSERT_EQUAL(hoff__host_tier_reserve(t, 60), 0);
    CU_ASSERT_EQUAL(hoff__host_tier_reserve(t, 50), -ENOSPC);
    CU_ASSERT_EQUAL(hoff__host_tier_used(t), 60);
    CU_ASSERT_EQUAL(hoff__host_tier_reserve(t, 40), 0);
    CU_ASSERT_EQUAL(hoff__host_tier_used(t), 100);
    CU_ASSERT_EQUAL(hoff__host_tier_reserve(t, 1), -ENOSPC);
    CU_ASSERT_EQUAL(hoff__host_tier_reserve(t, UINT64_MAX), -ENOSPC);
    CU_ASSERT_EQUAL(hoff__host_tier_reserve(t, 0), 0);
    hoff__host_tier_release(t, 30);
    CU_ASSERT_EQUAL(hoff__host_tier_used(t), 70);
    CU_ASSERT_EQUAL(hoff__host_tier_reserve(t, 30), 0);
    hoff__host_tier_release(t, 100);
    CU_ASSERT_EQUAL(hoff__host_tier_used(t), 0);
    CU_ASSERT_EQUAL(hoff__host_tier_peak(t), 100);
    hoff__host_tier_close(t);

    /* cap 0: no limit */
    CU_ASSERT_EQUAL_FATAL(hoff__host_tier_open(&t, "nearest", NULL, NULL, 0), 0);
    CU_ASSERT_EQUAL(hoff__host_tier_reserve(t, (uint64_t)1 << 60), 0);
    CU_ASSERT_EQUAL(hoff__host_tier_reserve(t, (uint64_t)1 << 60), 0);
    hoff__host_tier_release(t, (uint64_t)1 << 61);
    CU_ASSERT_EQUAL(hoff__host_tier_used(t), 0);
    hoff__host_tier_close(t);
}

#define CAP 10000u
#define ITERS 50000

struct cap_arg {
    struct hoff__host_tier *t;
    uint64_t seed;
    unsigned ok, refused, over;
};

static void *cap_worker(void *p) {
    struct cap_arg *a = p;

    for (int i = 0; i < ITERS; i++) {
        uint64_t bytes = hoff_test_rand(&a->seed) % 1500 + 1;

        if (hoff__host_tier_reserve(a->t, bytes) == 0) {
            a->ok++;
            if (hoff__host_tier_used(a->t) > CAP)
                a->over++;
            hoff__host_tier_release(a->t, bytes);
        } else {
            a->refused++;
        }
    }
    return NULL;
}

static void test_host_cap_threads(void) {
    struct hoff__host_tier *t;
    struct cap_arg args[8];
    pthread_t th[8];
    unsigned ok = 0, refused = 0, over = 0;

    CU_ASSERT_EQUAL_FATAL(hoff__host_tier_open(&t, "nearest", NULL, NULL, CAP), 0);
    for (int i = 0; i < 8; i++) {
        args[i] = (struct cap_arg){.t = t, .seed = 1234567 + (uint64_t)i * 7919};
        pthread_create(&th[i], NULL, cap_worker, &args[i]);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(th[i], NULL);
        ok += args[i].ok;
        refused += args[i].refused;
        over += args[i].over;
    }
    CU_ASSERT_EQUAL(ok + refused, 8u * ITERS);
    CU_ASSERT(ok > 0);
    CU_ASSERT_EQUAL(over, 0);
    CU_ASSERT_EQUAL(hoff__host_tier_used(t), 0);
    CU_ASSERT(hoff__host_tier_peak(t) <= CAP);
    CU_ASSERT(hoff__host_tier_peak(t) > 0);
    hoff__host_tier_close(t);
}

/* Every topology in the directory loads through hwloc's minimal XML parser, which main() forces: a machine without
 * libhwloc-plugins (hwloc's libxml2 plugin, only recommended by libhwloc15) has nothing else, and that parser reads
 * only XML in the form hwloc exports (no comments).  The control proves the parser really is the minimal one here,
 * so this holds even where the plugin is installed: a comment, which libxml2 accepts, must be refused. */
static void test_topologies_load_with_minimal_parser(void) {
#ifdef HAVE_HWLOC
    struct hoff__host_tier *t;
    char bad[] = "test_host_tier-topo-XXXXXX", line[4096];
    DIR *d = opendir(topo_dir());
    struct dirent *e;
    int files = 0, fd;
    FILE *in, *out;

    CU_ASSERT_STRING_EQUAL(getenv("HWLOC_LIBXML_IMPORT"), "0");
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        int rc;

        if (n < 5 || strcmp(e->d_name + n - 4, ".xml") != 0)
            continue;
        files++;
        t = NULL;
        rc = hoff__host_tier_open(&t, "interleave", NULL, topo(e->d_name), 0);
        if (rc)
            fprintf(stderr, "%s: %s\n", e->d_name, hoff_last_error());
        CU_ASSERT_EQUAL(rc, 0);
        if (t)
            hoff__host_tier_close(t);
    }
    closedir(d);
    CU_ASSERT(files >= 4);

    /* the control: one-socket.xml with a comment after the XML declaration */
    fd = mkstemp(bad);
    CU_ASSERT_FATAL(fd >= 0);
    out = fdopen(fd, "w");
    in = fopen(topo("one-socket.xml"), "r");
    CU_ASSERT_FATAL(in != NULL && out != NULL);
    if (fgets(line, sizeof line, in))
        fputs(line, out);
    fputs("<!-- a comment: libxml2 reads it, hwloc's minimal parser does not -->\n", out);
    while (fgets(line, sizeof line, in))
        fputs(line, out);
    fclose(in);
    fclose(out);
    t = NULL;
    CU_ASSERT_NOT_EQUAL(hoff__host_tier_open(&t, "nearest", NULL, bad, 0), 0);
    CU_ASSERT_PTR_NULL(t);
    unlink(bad);
#endif
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"topologies_load_with_minimal_parser", test_topologies_load_with_minimal_parser},
        {"two_sockets_gpu_on_socket1", test_two_sockets_gpu_on_socket1},
        {"one_socket", test_one_socket},
        {"no_numa_information", test_no_numa_information},
        {"several_gpus", test_several_gpus},
        {"eight_gpus", test_eight_gpus},
        {"gpu_not_found", test_gpu_not_found},
        {"interleave", test_interleave},
        {"explicit_lists", test_explicit_lists},
        {"bad_lists", test_bad_lists},
        {"this_machine", test_this_machine},
        {"staging", test_staging},
        {"host_cap", test_host_cap},
        {"host_cap_threads", test_host_cap_threads},
        {NULL, NULL},
    };

    /* hwloc's minimal XML parser for every topology of this suite, as on a machine without libhwloc-plugins
     * (hwloc reads this once, before its first XML import). */
    setenv("HWLOC_LIBXML_IMPORT", "0", 1);
    hoff__log_set_level(HOFF_LOG_OFF);
    return hoff_test_run("host_tier", tests);
}
