/* SPDX-License-Identifier: BSD-3-Clause */
/* The one table of FTCC_* settings.
 *
 * Every environment variable ftcc reads is declared once here with its type, default and a
 * one-line doc. Values are parsed once by ftcc_settings_load(); a malformed value is an error
 * (with a log line naming the variable), never silently replaced by the default.
 */
#ifndef FTCC_SETTINGS_H
#define FTCC_SETTINGS_H

#include <stdint.h>

/* X(name, type, default, min, max, doc). Types: INT (int64 in [min,max]), STR (string; min/max
 * unused). Name is the suffix after FTCC_. */
#define FTCC_SETTINGS(X)                                                                           \
	X(DEBUG, STR, "WARN", 0, 0, "log level without NCCL's logger: NONE, WARN, INFO or TRACE")  \
	X(SOCKET_IFNAME, STR, "", 0, 0,                                                            \
	  "interfaces to use, as NCCL_SOCKET_IFNAME: prefixes, ^ to exclude, = for exact names")   \
	X(FAILURE_TIMEOUT_MS, INT, 2000, 100, 600000,                                              \
	  "silence (no heartbeat, no bytes) after which a peer is declared lost")                  \
	X(HEARTBEAT_MS, INT, 0, 0, 60000,                                                          \
	  "heartbeat period; 0 = FAILURE_TIMEOUT_MS/8, at most 100")                               \
	X(NSTREAMS, INT, 2, 1, 16,                                                                 \
	  "data sockets per connection (bandwidth; each is a TCP stream)")                         \
	X(MIN_CHUNK_BYTES, INT, 131072, 4096, 1073741824,                                          \
	  "smallest piece of a message given to one data socket")                                  \
	X(RECONNECT_MS, INT, 0, 0, 600000,                                                         \
	  "how long to try to restore a reset connection; 0 = FAILURE_TIMEOUT_MS")                 \
	X(CONNECT_TIMEOUT_MS, INT, 30000, 100, 3600000,                                            \
	  "how long a connection attempt may take before it fails")                                \
	X(EAGER_MAX_BYTES, INT, 65536, 0, 1048576,                                                 \
	  "sends up to this size are copied and complete at once; larger ones when acknowledged")  \
	X(SOCKBUF_BYTES, INT, 0, 0, 268435456,                                                     \
	  "SO_SNDBUF/SO_RCVBUF of data sockets; 0 = kernel default")                               \
	X(NUMA_BIND, INT, 1, 0, 1, "run the progress thread on the NUMA node of the first NIC")    \
	X(COORDINATOR, STR, "", 0, 0,                                                              \
	  "membership backend: empty = embedded, host:port = ftcc-coordinator daemon, "            \
	  "etcd://... reserved")                                                                   \
	X(DEGRADED, STR, "rescale", 0, 0,                                                          \
	  "result over fewer members than the group's size: rescale, sum or fail")                 \
	X(ALGO, STR, "auto", 0, 0,                                                                 \
	  "allreduce algorithm: auto (by size), ring or rd; the same on every member")             \
	X(RD_MAX_BYTES, INT, 65536, 0, 1073741824,                                                 \
	  "auto: recursive doubling up to this size, the ring above")                              \
	X(SEGMENT_BYTES, INT, 1048576, 4096, 1073741824,                                           \
	  "ring pipeline segment: each ring step moves its chunk in pieces of this size")          \
	X(LANES, INT, 0, 0, 8,                                                                     \
	  "ops of a communicator in flight at once, each on a data plane of its own; the same on " \
	  "every member; 0 = 4 in the CollNet plug-in, 1 elsewhere")                               \
	X(MEASURE_NO_HAVE, INT, 0, 0, 1,                                                           \
	  "measurement only, the same on every member (not checked): 1 = ops return without the "  \
	  "have round (perf/ft_cost.sh); a failure can then stop the group")                       \
	X(COLLNET_MIN_NODES, INT, 1, 1, 1024,                                                      \
	  "CollNet: an op whose result has fewer nodes' input fails with ncclRemoteError")         \
	X(COLLNET_MIN_PERCENT, INT, 50, 0, 100,                                                    \
	  "CollNet: an op with the input of fewer than this % of the group's nodes fails "         \
	  "(ncclRemoteError); 0 = off")                                                            \
	X(PORT_RANGE, STR, "", 0, 0,                                                               \
	  "ports ftcc listens on, LO-HI (first free); empty = the kernel's choice")                \
	X(STATUS_DIR, STR, "", 0, 0,                                                               \
	  "CollNet: directory where each node publishes its group's status file; empty = none")    \
	X(TRANSPORT, STR, "auto", 0, 0,                                                            \
	  "transport of the net plug-in and the engine's data plane: auto (ib when an active "     \
	  "HCA port exists, else tcp), ib or tcp")                                                 \
	X(IBVERBS_LIB, STR, "", 0, 0, "libibverbs to load at run time; empty = libibverbs.so.1")   \
	X(CUDA_LIB, STR, "", 0, 0,                                                                 \
	  "CUDA driver to load at run time for the dma-buf of GPU memory; empty = libcuda.so.1")   \
	X(IB_DMABUF, INT, 1, 0, 1,                                                                 \
	  "register GPU memory on the HCA through dma-buf where it works; 0 = peer memory only")   \
	X(IB_HCA, STR, "", 0, 0,                                                                   \
	  "HCA ports to use, as NCCL_IB_HCA: name[:port],... ^ to exclude, = for exact names")     \
	X(IB_GID_INDEX, INT, -1, -1, 255,                                                          \
	  "GID index; -1 = 0 on IB, best RoCE v2 (IPv4-mapped first) on RoCE")                     \
	X(IB_TC, INT, 0, 0, 255, "traffic class of RoCE and routed IB packets")                    \
	X(IB_SL, INT, 0, 0, 15, "InfiniBand service level")                                        \
	X(IB_TIMEOUT, INT, 0, 0, 31,                                                               \
	  "QP ack timeout, 4.096 us x 2^N per try; 0 = the largest N in 12..20 with every try "    \
	  "within a quarter of FAILURE_TIMEOUT_MS")                                                \
	X(IB_RETRY_CNT, INT, 7, 0, 7, "QP transport retries before a work request fails")          \
	X(IB_QPS_PER_CONN, INT, 1, 1, 16, "RC queue pairs per connection, data striped over them") \
	X(FAULT, STR, "", 0, 0,                                                                    \
	  "test-only: point:seq[:step[:action]] makes this process die at an engine phase")        \
	X(INJECT, STR, "", 0, 0,                                                                   \
	  "test-only fault injection: name[:count] of a syscall wrapper to fail")

enum ftcc_setting_id {
#define FTCC_X_ENUM(name, type, def, min, max, doc) FTCC_SET_##name,
	FTCC_SETTINGS(FTCC_X_ENUM) /* FTCC_SET_DEBUG, ... */
#undef FTCC_X_ENUM
	FTCC_SET_COUNT
};

enum ftcc_setting_type { FTCC_SETTING_INT, FTCC_SETTING_STR };

/* Static description of one setting (for the README check and `--settings` listings). */
struct ftcc_setting_desc {
	const char *name; /* "FTCC_" prefixed */
	enum ftcc_setting_type type;
	const char *def; /* default, as text */
	int64_t min, max;
	const char *doc;
};

/* Returns the table of FTCC_SET_COUNT descriptions (static storage). */
const struct ftcc_setting_desc *ftcc_settings_table(void);

/* Reads every FTCC_* variable from the environment. Returns 0, or -EINVAL after logging
 * which variable is malformed (values are then left at their defaults). Thread-safe; later
 * calls re-read the environment (tests use that). */
int ftcc_settings_load(void);

/* Parses @text as setting @id into the current values. 0 or -EINVAL. Used by tests. */
int ftcc_settings_set(enum ftcc_setting_id id, const char *text);

/* Current value of an INT / STR setting. Never fails; the returned string lives until the
 * next load. */
int64_t ftcc_setting_int(enum ftcc_setting_id id);
const char *ftcc_setting_str(enum ftcc_setting_id id);

/* The heartbeat period for failure timeout @timeout_ms and heartbeat setting @hb_ms: @hb_ms when
 * positive, else @timeout_ms / 8 capped at 100; at least 5. */
int64_t ftcc_heartbeat_ms(int64_t timeout_ms, int64_t hb_ms);
/* The value in effect of INT setting @id, a setting whose 0 means "derived" resolved as the
 * library resolves it (HEARTBEAT_MS, RECONNECT_MS); others as set. */
int64_t ftcc_setting_effective(enum ftcc_setting_id id);

#endif
