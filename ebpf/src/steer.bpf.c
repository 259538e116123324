// SPDX-License-Identifier: Apache-2.0 OR GPL-2.0
//
// Strom's connection steering: an SK_REUSEPORT program that picks, for each new
// connection, the listener of the shard pinned to the CPU that is processing the SYN.
// Keeping the accepting shard on the SYN's CPU keeps the connection's softirq work, socket
// and shard on one core (no cross-core wakeup per packet).
//
// Self-contained on purpose: it declares the handful of kernel ABI constants and helper
// ids it uses instead of including libbpf's headers, so the build needs only clang.
// No BTF (-g) either: maps use the legacy `maps` section layout that aya-obj parses,
// and the loader sizes them at load time.

typedef unsigned int __u32;
typedef unsigned long long __u64;

#define SEC(name) __attribute__((section(name), used))

// From include/uapi/linux/bpf.h (stable ABI).
#define BPF_MAP_TYPE_ARRAY 2
#define BPF_MAP_TYPE_REUSEPORT_SOCKARRAY 20
#define SK_PASS 1

// Helper ids (stable ABI, enum bpf_func_id).
static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)1;
static __u32 (*bpf_get_smp_processor_id)(void) = (void *)8;
static long (*bpf_sk_select_reuseport)(void *reuse, void *map, void *key,
                                       __u64 flags) = (void *)82;

struct sk_reuseport_md;

// The legacy map definition aya-obj reads from the `maps` section.
struct bpf_map_def {
    __u32 type;
    __u32 key_size;
    __u32 value_size;
    __u32 max_entries;
    __u32 map_flags;
};

// Shard index -> that shard's listening socket. The kernel drops a socket from this map
// when it closes, so a shard that has not bound (or has gone) simply has no entry.
// max_entries is replaced by the shard count at load.
struct bpf_map_def SEC("maps") shard_sockets = {
    .type = BPF_MAP_TYPE_REUSEPORT_SOCKARRAY,
    .key_size = sizeof(__u32),
    .value_size = sizeof(__u64),
    .max_entries = 1,
};

// CPU id -> shard index. Sized to the possible CPUs at load, so more CPUs than shards
// (and shards on fewer CPUs) are one table lookup, decided in user space.
struct bpf_map_def SEC("maps") cpu_shard = {
    .type = BPF_MAP_TYPE_ARRAY,
    .key_size = sizeof(__u32),
    .value_size = sizeof(__u32),
    .max_entries = 1,
};

// [0] connections steered to their CPU's shard, [1] left to the kernel's hash (no shard
// for this CPU, or that shard's socket is not in the map yet).
struct bpf_map_def SEC("maps") steer_stats = {
    .type = BPF_MAP_TYPE_ARRAY,
    .key_size = sizeof(__u32),
    .value_size = sizeof(__u64),
    .max_entries = 2,
};

static void count(__u32 slot) {
    __u64 *n = bpf_map_lookup_elem(&steer_stats, &slot);
    if (n)
        __sync_fetch_and_add(n, 1);
}

// The section is "socket" only so that aya-obj (which does not know "sk_reuseport" yet,
// aya-rs/aya#215) parses it as a program; the loader loads it as BPF_PROG_TYPE_SK_REUSEPORT.
SEC("socket")
int strom_steer(struct sk_reuseport_md *md) {
    __u32 cpu = bpf_get_smp_processor_id();
    __u32 *shard = bpf_map_lookup_elem(&cpu_shard, &cpu);
    // Returning SK_PASS without selecting a socket makes the kernel use its hash.
    if (!shard) {
        count(1);
        return SK_PASS;
    }
    if (bpf_sk_select_reuseport(md, &shard_sockets, shard, 0) == 0)
        count(0);
    else
        count(1);
    return SK_PASS;
}

char _license[] SEC("license") = "Dual BSD/GPL";
