/* SPDX-License-Identifier: BSD-3-Clause */
/* ftcc-perf: shared declarations of the nccl-tests-style benchmark.
 *
 * A benchmark run is one mode (a row of the mode table in ftcc_perf.c) executed by nranks
 * forked processes on this host. The processes talk to each other over a bootstrap mesh of
 * socketpairs made before fork(); timed traffic goes over whatever the mode measures (the
 * ftcc plug-in, plain TCP sockets, ...). Rank 0 gathers the per-iteration times and prints.
 * Everything here is single-threaded per process.
 */
#ifndef FTCC_PERF_H
#define FTCC_PERF_H

#include <stddef.h>
#include <stdint.h>

#define PERF_MAX_RANKS 16
#define PERF_CHUNK_MAX (4u << 20) /* largest message of one iteration, like NCCL's buffer */
#define PERF_CONNECT_TIMEOUT_NS (10ull * 1000000000ull)
#define PERF_STALL_TIMEOUT_NS (30ull * 1000000000ull) /* no progress at all for this long */
/* Bootstrap messages only wait for short work of the peer (printing, a pattern fill or check,
 * finishing the same iterations), so a peer silent this long is stopped or hung. */
#define PERF_BOOT_TIMEOUT_MS 60000

/* Command-line options; filled once by main, read-only afterwards. */
struct perf_opts {
	size_t min_bytes, max_bytes;
	double step_factor;
	int iters, warmup, check, depth, json, roundtrip;
	int yield; /* plug-in modes: sched_yield after a pass without progress, as NCCL's proxy */
	int fault_iter;	       /* fault mode: iteration at which rank 1 gets the signal */
	const char *fault_sig; /* fault mode: "KILL" or "STOP" */
	int nranks;	       /* -N: ranks, for modes with max_ranks (0: the mode's nranks) */
	const char *dtype;     /* allreduce mode, -t: element type by ftcc name ("float32") */
	const char *redop;     /* allreduce mode, -o: "sum", "prod", "max", "min", "avg" */
	int inplace;	       /* allreduce mode, -I: sendbuf == recvbuf */
	int poll;	       /* allreduce mode, -P: ftcc_iallreduce + ftcc_test polled */
	const char *codec;     /* allreduce mode, -q: codec by name ("int8"); NULL: none */
	int kill_rank;	       /* allreduce mode, --kill R@I: rank R (>= 1) dies at timed */
	int kill_iter;	       /* iteration I of the last size; kill_rank -1: nobody */
	const char *mode;
	const char *plugin_path;
	int rank;	/* --rank, or the launcher's environment: this process is that rank */
	char boot[128]; /* --boot IPV4:PORT: where rank 0 listens for the others */
	int bind;	/* --bind: forked ranks' CPU binding (enum perf_bind) */
};

/* --bind: PERF_BIND_AUTO (0, the default) binds each forked rank to a core when there are at
 * most 2 ranks, as mpirun does by default. */
enum perf_bind { PERF_BIND_AUTO, PERF_BIND_CORE, PERF_BIND_NONE };

/* One process's end of the bootstrap mesh. fds[peer] is a connected stream socket to @peer
 * (-1 for self). host[r] is rank r's IPv4 address as the others reach it ("127.0.0.1" for
 * forked ranks). Owned by the rank process; closed by perf_boot_close(). */
struct perf_boot {
	int nranks, rank;
	int fds[PERF_MAX_RANKS];
	char host[PERF_MAX_RANKS][64];
	uint64_t run_id; /* the same on every rank of a run, different for concurrent runs */
};

/* One benchmark mode: a row of the const table in ftcc_perf.c. @run is called in every forked
 * rank and returns 0 or a negative errno (after printing why). */
struct perf_mode {
	const char *name;
	int nranks;
	const char *doc;
	int (*run)(const struct perf_opts *o, struct perf_boot *b);
	int victim;    /* rank that is meant to die of a signal (fault mode), or -1 */
	int max_ranks; /* -N may set 1..max_ranks ranks; 0: always nranks */
};

/* The check of a quantized allreduce (perf_quant.c): @value(@arg, i, k) is rank k's input
 * element i, member[k] whether it is in the result. */
struct perf_q_check {
	int codec, nranks, bf16;
	const int *member;
	double (*value)(const void *arg, size_t i, int rank);
	const void *arg;
};
/* The codec named @name (NULL: none), or -1. */
int perf_q_parse(const char *name);
const char *perf_q_name(int codec);
/* Payload bytes rank 0 sends in one quantized allreduce of @count elements. */
size_t perf_q_payload(int codec, int nranks, size_t count);
/* Elements of @got (float32, or bfloat16) outside the documented bound of the exact sum;
 * *@max_rel the largest error over the largest magnitude of the result. */
uint64_t perf_q_wrong(const struct perf_q_check *c, const void *got, size_t count, double *max_rel);
/* Prints the payload and error line of one size. */
void perf_q_report(const struct perf_opts *o, int codec, int nranks, size_t count, size_t esz,
		   double max_rel);
/* What rank 0 reports for one size. Times in microseconds. */
struct perf_result {
	size_t size, count;
	const char *type, *redop;
	int iters;
	double t_min, t_med, t_p99, t_mean;
	double algbw, busbw; /* GB/s (1e9), from the median time */
	uint64_t wrong;
};

/* How per-iteration times of the ranks are combined into one time per iteration. */
enum perf_combine {
	PERF_TIME_MAX,	 /* slowest rank (a transfer ends when its last side ends) */
	PERF_TIME_RANK0, /* rank 0 only (round trips are measured where they start) */
};

/* --- perf_common.c ------------------------------------------------------------------------- */

/* Parses "123", "4K", "64M", "1G" (binary multiples, optional trailing B). 0 or -EINVAL. */
int perf_parse_size(const char *text, size_t *out);

/* Monotonic clock in nanoseconds. */
uint64_t perf_now_ns(void);

/* Creates the socketpair mesh for @nranks in @all (one struct per rank, fds not yet trimmed).
 * 0 or -errno. Call perf_boot_keep(all, rank) in each child to keep only its own ends. */
int perf_boot_create(struct perf_boot *all, int nranks);
void perf_boot_keep(struct perf_boot *all, int rank);
void perf_boot_close(struct perf_boot *b);

/* --- perf_hosts.c: one rank per process, across hosts ------------------------------------ */

/* Joins the bootstrap mesh of @nranks ranks over TCP as @rank; rank 0 listens on @boot
 * ("IPV4:PORT" or "name:PORT"). Bounded by PERF_BOOT_TIMEOUT_MS; strangers are refused. 0 or
 * -errno (printed). */
int perf_boot_tcp(struct perf_boot *b, int rank, int nranks, const char *boot);
/* Fills what the options left unset from a launcher's environment: the rank and size (mpirun's
 * OMPI_COMM_WORLD_*, PMIx/PMI, srun's SLURM_*, torchrun's RANK/WORLD_SIZE) and the bootstrap
 * (FTCC_PERF_BOOT, else MASTER_ADDR:MASTER_PORT). 1 when a rank is known (run one rank here),
 * 0 when not (fork the ranks here), -1 after a line saying a value is malformed. */
int perf_launch_env(int *rank, int *nranks, char *boot, size_t len);

/* Blocking, exact-length exchange with @peer over the bootstrap. 0, or -EPIPE on a closed
 * peer (the peer process died), -ETIMEDOUT when a receive waits PERF_BOOT_TIMEOUT_MS without a
 * byte, or -errno. Retries EINTR. */
int perf_boot_send(struct perf_boot *b, int peer, const void *buf, size_t len);
int perf_boot_recv(struct perf_boot *b, int peer, void *buf, size_t len);

/* All ranks wait for each other (star through rank 0). 0 or -errno. */
int perf_boot_barrier(struct perf_boot *b);

/* Fills @buf with the check pattern of (iteration @iter, byte offset); counts bytes that differ
 * from that pattern. Pure functions of their arguments. */
void perf_pattern_fill(void *buf, size_t len, uint64_t iter);
uint64_t perf_pattern_wrong(const void *buf, size_t len, uint64_t iter);

/* Gathers each rank's @n iteration times (ns) and wrong-byte count to rank 0 and, on rank 0,
 * fills the time and wrong fields of @res. Collective: every rank calls it with the same @n.
 * 0 or -errno. */
int perf_collect(struct perf_boot *b, const uint64_t *times_ns, int n, uint64_t wrong,
		 enum perf_combine how, struct perf_result *res);

/* Sets algbw = @bytes / median time, and busbw = algbw * @busbw_factor. */
void perf_result_bw(struct perf_result *res, double bytes, double busbw_factor);

/* Rank 0 only: prints the header (with @notes, '#'-prefixed lines, may be NULL) / one row.
 * Table or JSON lines by o->json. */
void perf_report_header(const struct perf_opts *o, const char *notes);
void perf_report_row(const struct perf_opts *o, const struct perf_result *res);

/* --- perf_pair.c: the two-rank transfer benchmark shared by p2p and sock modes -------------- */

/* A transport between rank 0 and rank 1. Every call blocks until done (bounded), and returns 0
 * or a negative errno after printing why. */
struct perf_pair_ops {
	/* rank 0: sends @size bytes of @buf; rank 1: receives exactly @size bytes into @buf. */
	int (*send)(void *t, void *buf, size_t size);
	int (*recv)(void *t, void *buf, size_t size);
	/* One round trip. rank 0: sends @sbuf and receives the echo into @rbuf. rank 1: receives
	 * into @rbuf and sends it back. */
	int (*pingpong)(void *t, int rank, void *sbuf, void *rbuf, size_t size);
};

/* Runs the size sweep of @o over @ops between ranks 0 and 1 (rank 0 decides the plan and sends
 * it to rank 1), prints on rank 0. @sbuf/@rbuf hold at least o->max_bytes. 0 or -errno. */
int perf_pair_run(const struct perf_opts *o, struct perf_boot *b, const struct perf_pair_ops *ops,
		  void *t, void *sbuf, void *rbuf, const char *notes);

/* Page-aligned buffer of @size bytes (at least 1), touched so page faults are not timed. */
void *perf_buf_alloc(size_t size);

/* --- perf_allreduce.c: the allreduce sweep of the allreduce and collnet modes ------------- */

struct ftcc_record;

/* How the allreduce sweep runs ops: one mode's way into the library (the C API, the CollNet
 * plug-in). A const table; each rank's state is the @t given to perf_ar_run(). Functions
 * return 0 or a negative errno after printing why. */
struct perf_ar_driver {
	const char *name;	/* JSON "driver" */
	const char *what;	/* the header's words for how ops are run */
	const char *close_what; /* the calls close makes, for the close-time line */
	/* Joins the group of all ranks (collective; blocks, bounded). Every op uses the buffers
	 * @sbuf and @rbuf of @bytes each (the caller owns them; a driver may register them). */
	int (*open)(void *t, struct perf_boot *b, void *sbuf, void *rbuf, size_t bytes);
	/* One allreduce of @count elements from @src into @dst (equal: in place), to completion.
	 * @dtype and @redop are enum ftcc_dtype / ftcc_redop values (also NCCL's). Fills @rec with
	 * the op's record where the driver has one, else leaves it. */
	int (*op)(void *t, const void *src, void *dst, size_t count, int dtype, int redop,
		  struct ftcc_record *rec);
	/* Leaves the group and frees what open made; never waits for a peer. */
	void (*close)(void *t);
};

/* One rank's whole allreduce benchmark through @drv: parses -t/-o, allocates the buffers,
 * opens, runs the size sweep (fill, op, check, gather, print on rank 0), then closes and
 * reports the slowest rank's close time. Collective. 0 or -errno. */
int perf_ar_run(const struct perf_opts *o, struct perf_boot *b, const struct perf_ar_driver *drv,
		void *t);

/* Calls @test(@arg, &done) until it sets done or fails, as NCCL's proxy thread polls a request:
 * after a call that did not finish it yields the CPU if @yield (sched_yield, as the proxy does
 * when idle), else spins. -ETIMEDOUT (printed, naming @what) after PERF_STALL_TIMEOUT_NS
 * without completion; else 0 or @test's negative errno. */
int perf_ar_poll(int (*test)(void *arg, int *done), void *arg, int yield, const char *what);

/* --- modes ---------------------------------------------------------------------------------- */

int perf_p2p_run(const struct perf_opts *o, struct perf_boot *b);	/* perf_p2p.c */
int perf_fault_run(const struct perf_opts *o, struct perf_boot *b);	/* perf_fault.c */
int perf_sock_run(const struct perf_opts *o, struct perf_boot *b);	/* perf_sock.c */
int perf_allreduce_run(const struct perf_opts *o, struct perf_boot *b); /* perf_allreduce.c */
int perf_msg_run(const struct perf_opts *o, struct perf_boot *b);	/* perf_msg.c */
int perf_colls_run(const struct perf_opts *o, struct perf_boot *b);	/* perf_colls.c */
/* Control addresses of a C API group of the ranks: each picks a free port on its own address;
 * rank 0 gathers them, names the group and sends everything round. 0 or -errno. */
int perf_capi_addrs(struct perf_boot *b, char (*addrs)[80], char *group, size_t glen);
/* The ranks' C API group (embedded coordinator) with policy @degraded: this rank's member in
 * *@comm. 0 or -errno (printed). */
struct ftcc_comm;
int perf_capi_comm(struct perf_boot *b, int degraded, struct ftcc_comm **comm);
int perf_collnet_run(const struct perf_opts *o, struct perf_boot *b); /* perf_collnet.c */

#endif
