/* SPDX-License-Identifier: BSD-3-Clause */
/* ftcc: fault-tolerant allreduce (and broadcast, allgather, reduce-scatter, barrier) for groups of
 * processes, as a plain C API.
 *
 * A communicator is one member of a named group. Members form the group together (each knows
 * the group's size and every member's control address, or a coordinator daemon), then issue
 * allreduce ops in the same order, as MPI requires. When a member dies, freezes or is cut off,
 * the survivors finish the op in flight and keep going under a new membership epoch:
 *
 *  - every member that completes op s gets bit-identical results and the same contributor set;
 *  - a member that failed after its input was folded into data the survivors hold is still
 *    counted; otherwise the survivors redo the op from their preserved inputs;
 *  - a result over fewer contributors than the group's size follows the degraded policy
 *    (FTCC_DEGRADED_RESCALE, _SUM or _FAIL), and every op reports its record (epoch, sequence
 *    number, contributor set);
 *  - abort returns within 100 ms and the others see this member leave;
 *  - a restarted member joins again at an op boundary the group agrees on, optionally as a
 *    non-contributor (catch-up) until it declares itself ready.
 *
 * Every function is thread-safe. Ops of one communicator are numbered in the order their
 * start calls return; calls on one communicator from several threads must keep the same order
 * on every member. Errors are negative FTCC_ERR_* values; ftcc_strerror() names them and
 * ftcc_comm_last_error() says what happened in words.
 */
#ifndef FTCC_H
#define FTCC_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FTCC_API __attribute__((visibility("default")))

/* The version of this header; ftcc_version() gives the library's. The build takes the project
 * version from these three lines. */
#define FTCC_VERSION_MAJOR 0
#define FTCC_VERSION_MINOR 1
#define FTCC_VERSION_PATCH 0
#define FTCC_VERSION_CODE(major, minor, patch) ((major)*10000 + (minor)*100 + (patch))
#define FTCC_VERSION FTCC_VERSION_CODE(FTCC_VERSION_MAJOR, FTCC_VERSION_MINOR, FTCC_VERSION_PATCH)

/* Ops started and not yet executed, per communicator; one more start returns FTCC_ERR_BUSY. */
#define FTCC_MAX_INFLIGHT 4096

/* The largest group. */
#define FTCC_MAX_MEMBERS 1024

/* The most streams of a communicator (struct ftcc_config's nstreams, ftcc_comm_stream()). */
#define FTCC_STREAMS_MAX 8

/* The largest element count of one op (2^40 - 1: every op's shape travels in one 64-bit word). */
#define FTCC_MAX_COUNT ((size_t)0xffffffffffull)

/* Element types; the values are NCCL's ncclDataType_t (2.24 and later), so they convert by
 * cast. */
enum ftcc_dtype {
	FTCC_INT8 = 0,
	FTCC_UINT8 = 1,
	FTCC_INT32 = 2,
	FTCC_UINT32 = 3,
	FTCC_INT64 = 4,
	FTCC_UINT64 = 5,
	FTCC_FLOAT16 = 6,
	FTCC_FLOAT32 = 7,
	FTCC_FLOAT64 = 8,
	FTCC_BFLOAT16 = 9,
	FTCC_FP8_E4M3 = 10,
	FTCC_FP8_E5M2 = 11,
	FTCC_DTYPE_COUNT = 12
};

/* Operators; the values are NCCL's ncclRedOp_t (note MAX before MIN). */
enum ftcc_redop {
	FTCC_SUM = 0,
	FTCC_PROD = 1,
	FTCC_MAX = 2,
	FTCC_MIN = 3,
	FTCC_AVG = 4,
	FTCC_REDOP_COUNT = 5
};

/* Codecs of a quantized allreduce (struct ftcc_op_opts): each member's input is cut into blocks
 * of FTCC_CODEC_BLOCK elements, sent as one float32 scale per block and a small code per element,
 * and summed in float32; the sum is encoded once more by the member that reduced it, and every
 * member decodes that same encoding, so results are bit-identical everywhere. Error of one
 * encoding, per element of a block whose largest magnitude is m: int8 m / 254, int4 m / 14,
 * fp8 e4m3 |x| / 16 + m / 458752, each plus 2^-149 (README "Quantized allreduce" has the bound
 * of a whole op). A NaN or infinity, or a sum that overflows float32, makes its block NaN in the
 * result. */
enum ftcc_codec {
	FTCC_CODEC_NONE = 0,	 /* full precision (plain allreduce) */
	FTCC_CODEC_INT8 = 1,	 /* signed 8-bit integer codes, 3.94x fewer bytes than float32 */
	FTCC_CODEC_FP8_E4M3 = 2, /* fp8 e4m3 codes (scale maps the block's maximum to 448) */
	FTCC_CODEC_INT4 = 3,	 /* signed 4-bit integer codes, two per byte: 7.76x fewer */
	FTCC_CODEC_COUNT = 4
};
#define FTCC_CODEC_BLOCK 256

/* Errors (negative). */
enum ftcc_error {
	FTCC_OK = 0,
	FTCC_ERR_INVALID = -1,	  /* a bad argument or configuration (the log says which) */
	FTCC_ERR_NOMEM = -2,	  /* out of memory */
	FTCC_ERR_SYSTEM = -3,	  /* a system call failed (sockets, threads) */
	FTCC_ERR_TIMEOUT = -4,	  /* the group did not form (or admit us) within the bound */
	FTCC_ERR_LOST = -5,	  /* this member can no longer make progress: no quorum on its
				 * side of a partition, removed from the group, or left */
	FTCC_ERR_DEGRADED = -6,	  /* policy FTCC_DEGRADED_FAIL: the op completed, everywhere,
				 * without some members' input; its record says whose */
	FTCC_ERR_ABORTED = -7,	  /* the communicator was aborted with the op in flight */
	FTCC_ERR_BUSY = -8,	  /* too many ops started and not executed (FTCC_MAX_INFLIGHT) */
	FTCC_ERR_MISMATCH = -9,	  /* the members called this op with different shapes (count,
				 * type or op): it ended so on every member of the op, nobody
				 * was removed, and the communicator goes on with the next op;
				 * ftcc_comm_last_error() names both shapes and members */
	FTCC_ERR_PEER_LOST = -10, /* the member an op depended on (a broadcast's root) left or
				   * died before its data reached the group: the op ended so on
				   * every member, and the communicator goes on; for a
				   * point-to-point request: its peer left the group */
	FTCC_ERR_CANCELED = -11,  /* the request was cancelled (ftcc_cancel()) */
};

/* What a result over fewer contributors than the group's size becomes. */
enum ftcc_degraded {
	FTCC_DEGRADED_DEFAULT = 0, /* FTCC_DEGRADED from the environment (default "rescale") */
	FTCC_DEGRADED_RESCALE = 1, /* SUM of floating-point types is scaled by size / contributors
				    * (an unbiased estimate of the full sum); integers, PROD, MIN,
				    * MAX as SUM below; AVG always divides by the contributors */
	FTCC_DEGRADED_SUM = 2,	   /* the plain reduction over the contributors */
	FTCC_DEGRADED_FAIL = 3,	   /* the plain reduction, and the op returns FTCC_ERR_DEGRADED */
};

/* Communicator configuration. Start from ftcc_config_init(); strings are copied. */
struct ftcc_config {
	uint32_t struct_size;	  /* set by ftcc_config_init(): sizeof(struct ftcc_config) */
	uint32_t version;	  /* set by ftcc_config_init(): FTCC_VERSION of the header */
	const char *group;	  /* group name, 1..63 bytes (one group per job/communicator) */
	uint32_t rank;		  /* this member's id, < size */
	uint32_t size;		  /* members at formation, 1..FTCC_MAX_MEMBERS */
	const char *const *addrs; /* control address "host:port" of each member (size entries);
				    * the embedded coordinator needs them; with a daemon only
				    * addrs[rank]'s host is used, or NULL for the first network
				    * interface (FTCC_SOCKET_IFNAME) */
	const char *coordinator;  /* NULL: FTCC_COORDINATOR; "" or "embedded"; "host:port" */
	int join;		  /* 1: join a running group (a restart) instead of forming it */
	int catchup;		  /* with join: contribute the identity (0 for sums) until
				   * ftcc_comm_ready() */
	enum ftcc_degraded degraded;
	int64_t timeout_ms;	    /* silence before a member is declared lost; 0: setting */
	int64_t connect_timeout_ms; /* bound on forming or joining; 0: setting */
	uint32_t nstreams; /* independent op sequences (ftcc_comm_stream()), 1..FTCC_STREAMS_MAX,
			    * the same on every member; 0: 1 (so it is for a program built with a
			    * header older than this field) */
};

/* Which members' inputs are in an op's result, and where it was decided. */
struct ftcc_record {
	uint64_t seq;	   /* op sequence number in the group (0, 1, ...), in the op's stream */
	uint64_t epoch;	   /* epoch whose members computed the result */
	uint32_t size;	   /* group size at formation */
	uint32_t ncontrib; /* members whose input is in the result */
	uint32_t attempts; /* 1, or more when a failure interrupted the op */
	int resumed;	   /* 1: finished from reduced data survivors held (promise 4) */
	double scale;	   /* factor applied by the rescale policy (1.0: none) */
	uint8_t contrib[FTCC_MAX_MEMBERS / 8]; /* bit i (byte i/8, bit i%8): member i */
};

/* The group as this member sees it. */
struct ftcc_view {
	uint64_t epoch;	   /* current epoch (0 before the group formed) */
	uint64_t boundary; /* first op of that epoch */
	uint32_t nmembers;
	int self_index;	      /* position of this member in members[], -1 if not in it */
	uint32_t coordinator; /* member id hosting the coordinator (UINT32_MAX: a daemon) */
	int contributor;      /* 0 while catching up */
	uint64_t next_seq;    /* the sequence number the next op will get (in the stream whose
			       * handle was passed) */
	int state;	      /* 0 ok, or the FTCC_ERR_* the communicator ended with */
};

/* Options of one op, for the *_opts calls. Start from ftcc_op_opts_init(); later fields will be
 * added at the end, their zero meaning what calls without options do (a library older than the
 * header takes a larger struct whose extra bytes are all zero). */
struct ftcc_op_opts {
	uint32_t struct_size; /* set by ftcc_op_opts_init(): sizeof(struct ftcc_op_opts) */
	uint32_t codec;	      /* enum ftcc_codec: FTCC_CODEC_NONE, or a codec (float32 or
			       * bfloat16, SUM or AVG) */
};

typedef struct ftcc_comm ftcc_comm_t;
typedef struct ftcc_request ftcc_request_t;

/* Sets @cfg to the defaults (everything 0 or NULL) and stamps it with this header's size and
 * version, which ftcc_comm_create() checks: a configuration not made by it is refused. */
static inline void ftcc_config_init(struct ftcc_config *cfg)
{
	*cfg = (struct ftcc_config){ .struct_size = (uint32_t)sizeof(*cfg),
				     .version = FTCC_VERSION,
				     .degraded = FTCC_DEGRADED_DEFAULT };
}

/* Sets @o to the defaults (a plain op). */
static inline void ftcc_op_opts_init(struct ftcc_op_opts *o)
{
	memset(o, 0, sizeof(*o)); /* padding too: a library checks a newer struct's tail is 0 */
	o->struct_size = (uint32_t)sizeof(*o);
	o->codec = FTCC_CODEC_NONE;
}

/* Creates this member and waits until the group formed (or admitted it, with join), bounded by
 * connect_timeout_ms. 0 and *@out, or FTCC_ERR_INVALID / _TIMEOUT / _LOST / _SYSTEM / _NOMEM. */
FTCC_API int ftcc_comm_create(const struct ftcc_config *cfg, ftcc_comm_t **out);

/* Leaves the group and frees everything once the ops in flight are done or failed. Ops still
 * in flight end with FTCC_ERR_ABORTED. Requests not yet returned by ftcc_test()/ftcc_wait()
 * are freed with the communicator and must not be used afterwards. Bounded like abort. */
FTCC_API int ftcc_comm_destroy(ftcc_comm_t *comm);

/* Returns within 100 ms whatever the peers do: ops in flight end with FTCC_ERR_ABORTED (their
 * requests stay valid until tested or waited), the others see this member leave. The
 * communicator must still be destroyed. */
FTCC_API int ftcc_comm_abort(ftcc_comm_t *comm);

/* Current view, and the members (ids, in order) into @members (up to @cap). */
FTCC_API int ftcc_comm_view(ftcc_comm_t *comm, struct ftcc_view *view, uint32_t *members,
			    uint32_t cap);

/* A catch-up member is ready to contribute from the next epoch on. */
FTCC_API int ftcc_comm_ready(ftcc_comm_t *comm);

/* Streams: a communicator created with nstreams > 1 runs that many independent op sequences
 * over one membership. *@out is stream @stream's handle (stream 0: @comm itself), which every
 * collective call takes in place of @comm (ftcc_allreduce, ftcc_ibroadcast, ...; not the
 * point-to-point or state calls, nor destroy or abort: those take @comm). The ordering rule
 * holds within a stream only: every member calls a stream's ops in the same order, and calls
 * of different streams may interleave in any order on each member (a fragment per stream, each
 * on its own schedule). Each stream numbers its ops from 0 (the records' seq), has lanes of its
 * own (FTCC_LANES each), and has its interrupted ops resumed or redone like any op: a failure
 * starts one epoch for all streams, whose boundary is taken in each stream from that stream's
 * own progress. The handle lives as long as @comm. 0, or FTCC_ERR_INVALID (no such stream). */
FTCC_API int ftcc_comm_stream(ftcc_comm_t *comm, uint32_t stream, ftcc_comm_t **out);

/* Blocking allreduce of @count elements (at most FTCC_MAX_COUNT): @recvbuf = OP over
 * contributors of @sendbuf. @sendbuf == @recvbuf is in place. @rec (may be NULL) receives the
 * record. Returns 0, FTCC_ERR_DEGRADED (policy fail; @recvbuf and @rec are still filled), _LOST,
 * _ABORTED, _INVALID, or _MISMATCH (another member called op with another count, type or op:
 * an in-place buffer holds its input again, an out-of-place @recvbuf is unspecified). */
FTCC_API int ftcc_allreduce(ftcc_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
			    enum ftcc_dtype dtype, enum ftcc_redop op, struct ftcc_record *rec);

/* Starts an allreduce and returns at once with *@req. The buffers belong to the op until it
 * completes. Ops started this way run side by side with the ops before and after them, up to
 * FTCC_LANES consecutive ones (each on a data plane of its own): a later op may complete before
 * an earlier one, and its result and record are the same either way. */
FTCC_API int ftcc_iallreduce(ftcc_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
			     enum ftcc_dtype dtype, enum ftcc_redop op, ftcc_request_t **req);

/* ftcc_allreduce and ftcc_iallreduce with options (@opts NULL: none). Every member must call an
 * op with the same options: a member that calls it with another codec gets FTCC_ERR_MISMATCH, as
 * for another count. A codec with a type other than float32 or bfloat16, or an operator other
 * than SUM or AVG, is FTCC_ERR_INVALID. */
FTCC_API int ftcc_allreduce_opts(ftcc_comm_t *comm, const void *sendbuf, void *recvbuf,
				 size_t count, enum ftcc_dtype dtype, enum ftcc_redop op,
				 const struct ftcc_op_opts *opts, struct ftcc_record *rec);
FTCC_API int ftcc_iallreduce_opts(ftcc_comm_t *comm, const void *sendbuf, void *recvbuf,
				  size_t count, enum ftcc_dtype dtype, enum ftcc_redop op,
				  const struct ftcc_op_opts *opts, ftcc_request_t **req);

/* The other collectives. They run through the allreduce engine (an op of each is numbered,
 * recorded, resumed or redone as an allreduce is), so the ordering rule, the records and the
 * degraded policy are the same; another kind of op, or another root, byte count (broadcast,
 * allgather), count, type or operator (reduce-scatter) at the same point is FTCC_ERR_MISMATCH,
 * after which a broadcast's or allgather's buffer holds zeros outside the member's own data.
 * Slots follow member ids: member i's block is at i * count elements, for the group's size at
 * formation. The buffers are the op's from the start call on (the allgather's other slots are
 * zeroed then). Counts: broadcast and allgather at most
 * FTCC_MAX_COUNT / 8 elements in all, reduce-scatter FTCC_MAX_COUNT in all. Each is the blocking
 * call; the ftcc_i* form returns a request.
 *
 * Broadcast of @count elements of @buf from member @root. Returns FTCC_ERR_PEER_LOST on every
 * member when the root's data is not in the result: it left or died before its data was kept
 * by the survivors, or it is catching up (contributes nothing); the root's @buf then holds its
 * data again, the others' are zero. 0 otherwise, whichever other members are missing (whatever
 * the degraded policy). */
FTCC_API int ftcc_broadcast(ftcc_comm_t *comm, void *buf, size_t count, enum ftcc_dtype dtype,
			    uint32_t root, struct ftcc_record *rec);
FTCC_API int ftcc_ibroadcast(ftcc_comm_t *comm, void *buf, size_t count, enum ftcc_dtype dtype,
			     uint32_t root, ftcc_request_t **req);
/* Allgather: @recvbuf (size * @count elements) gets each contributor's @count elements of
 * @sendbuf in its slot; the slots of members not in the record are zero. @sendbuf may be this
 * member's slot of @recvbuf (in place). */
FTCC_API int ftcc_allgather(ftcc_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
			    enum ftcc_dtype dtype, struct ftcc_record *rec);
FTCC_API int ftcc_iallgather(ftcc_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
			     enum ftcc_dtype dtype, ftcc_request_t **req);
/* Reduce-scatter: the allreduce of @sendbuf's size * @count elements, of which this member
 * gets its slot's @count elements in @recvbuf (which may overlap @sendbuf). */
FTCC_API int ftcc_reduce_scatter(ftcc_comm_t *comm, const void *sendbuf, void *recvbuf,
				 size_t count, enum ftcc_dtype dtype, enum ftcc_redop op,
				 struct ftcc_record *rec);
FTCC_API int ftcc_ireduce_scatter(ftcc_comm_t *comm, const void *sendbuf, void *recvbuf,
				  size_t count, enum ftcc_dtype dtype, enum ftcc_redop op,
				  ftcc_request_t **req);
/* Barrier: returns once every member of the op's epoch entered it (those that left or died
 * are not waited for; the record says who took part). */
FTCC_API int ftcc_barrier(ftcc_comm_t *comm, struct ftcc_record *rec);
FTCC_API int ftcc_ibarrier(ftcc_comm_t *comm, ftcc_request_t **req);

/* Point-to-point messages between members, by member id, outside the op order: any member may
 * send to any other at any time, and nothing else waits for them. A message carries a 64-bit
 * @tag; a receive takes the first message, in the order each sender sent them, whose source and
 * tag it names (FTCC_ANY_SOURCE: any member's; FTCC_ANY_TAG: any tag) and whose length is at
 * most the receive's @bytes. Messages wait at the receiver for a receive: a message's data
 * moves once a receive took it (one of up to 4 KiB travels with its announcement, and up to
 * 4 MiB of those are kept at a receiver), so memory at the receiver does not grow with
 * unexpected messages; receives wait in the order they were posted. Faults between live
 * members (a reset link, a cut that heals) are retried: a message is delivered exactly once. A
 * request whose peer leaves the group (dies, is removed, restarts as a new incarnation) ends
 * with FTCC_ERR_PEER_LOST; a receive from any source waits on for the others. The communicator
 * stays usable. A wait on a peer that is alive but never sends or receives ends only by its own
 * bound: use ftcc_wait_p2p()'s timeout and ftcc_cancel().
 *
 * ftcc_isend: sends @bytes of @buf to member @dest (self too), @tag at most FTCC_TAG_MAX. The
 * buffer belongs to the request until it ends. It ends with 0 once the receiver holds the
 * message. */
#define FTCC_ANY_SOURCE UINT32_MAX
#define FTCC_ANY_TAG UINT64_MAX
#define FTCC_TAG_MAX ((UINT64_C(1) << 63) - 1) /* tags above are the library's own */
FTCC_API int ftcc_isend(ftcc_comm_t *comm, const void *buf, size_t bytes, uint32_t dest,
			uint64_t tag, ftcc_request_t **req);
/* ftcc_irecv: receives one message from member @source (or FTCC_ANY_SOURCE) with @tag (or
 * FTCC_ANY_TAG) into @buf, which belongs to the request until it ends. A message longer than
 * @bytes is not taken: the receive ends with FTCC_ERR_INVALID and the message waits for
 * another. */
FTCC_API int ftcc_irecv(ftcc_comm_t *comm, void *buf, size_t bytes, uint32_t source, uint64_t tag,
			ftcc_request_t **req);
/* Cancels a point-to-point request. A receive: when this returns, its buffer is the caller's
 * again and nothing more is written into it; the request ends with FTCC_ERR_CANCELED (or with
 * its own result, when it ended before), and a message it had taken goes back to wait for
 * another receive (its data, if already on the way, is dropped and sent again). A send:
 * withdrawn unless its data began to move, then the request ends with FTCC_ERR_CANCELED and the
 * receiver never sees the message; FTCC_ERR_BUSY when its data is already moving (the request
 * then ends as a send does). The request must still be collected with ftcc_test() or a wait
 * (another thread may cancel while one waits, as long as the request was not collected). 0,
 * FTCC_ERR_BUSY, or FTCC_ERR_INVALID (not a point-to-point request). */
FTCC_API int ftcc_cancel(ftcc_request_t *req);

/* State healing: a member that joined (a restart, catching up) gets the group's state (the
 * model, the optimizer) from a live member while the others go on with their ops.
 *
 * ftcc_state_offer: this member serves @bytes of @buf under @name (1..63 bytes) to any member
 * that fetches it; its progress thread sends it, the application takes no part. The buffer
 * must stay as it is until ftcc_state_withdraw() returns (a consistent copy: the application
 * makes one at a step boundary, then offers it). A name offered twice is FTCC_ERR_INVALID.
 * ftcc_state_withdraw: no new fetch gets it; waits for the sends of it in flight (they end when
 * their fetcher has it, gives it up, or leaves the group: within about four failure timeouts),
 * or FTCC_ERR_BUSY when some still run then (the buffer is still read; try again).
 * ftcc_state_ifetch: fetches @name's state, exactly @bytes, into @buf from a contributing member
 * that offers it: the lowest id first, then the next whenever a source is lost, leaves, or does
 * not offer it (with that size) — a source lost mid-transfer is retried from another. The
 * request ends (ftcc_wait_p2p: its status names the source) with 0, FTCC_ERR_INVALID when every
 * live member said it does not offer it, FTCC_ERR_PEER_LOST when no member was left to ask;
 * ftcc_cancel ends it at once (FTCC_ERR_CANCELED). A catch-up member keeps calling the
 * group's ops meanwhile (they need it), then calls ftcc_comm_ready(). */
FTCC_API int ftcc_state_offer(ftcc_comm_t *comm, const char *name, const void *buf, size_t bytes);
FTCC_API int ftcc_state_withdraw(ftcc_comm_t *comm, const char *name);
FTCC_API int ftcc_state_ifetch(ftcc_comm_t *comm, const char *name, void *buf, size_t bytes,
			       ftcc_request_t **req);

/* What a point-to-point request moved. */
struct ftcc_p2p_status {
	uint32_t source; /* a receive: the sender's id; a send: the destination */
	uint32_t reserved;
	uint64_t tag; /* the message's tag */
	size_t bytes; /* its length */
};

/* Waits up to @timeout_ms (< 0: no bound) for a point-to-point request. When it ended: frees it,
 * fills @st (may be NULL) and returns its result. FTCC_ERR_TIMEOUT when it has not ended by then
 * (the request stays the caller's: wait again, or cancel it). ftcc_test() and ftcc_wait() take
 * point-to-point requests too (their record names the peer). */
FTCC_API int ftcc_wait_p2p(ftcc_request_t *req, int64_t timeout_ms, struct ftcc_p2p_status *st);

/* Progress; *@done = 1 when finished: the request is then freed and the op's result returned
 * (as ftcc_allreduce). Otherwise 0 with *@done = 0. */
FTCC_API int ftcc_test(ftcc_request_t *req, int *done, struct ftcc_record *rec);

/* Waits for the op (bounded by the failure detection and the group's progress), frees the
 * request and returns its result. */
FTCC_API int ftcc_wait(ftcc_request_t *req, struct ftcc_record *rec);

/* Whether member @id's input is in the result. */
static inline int ftcc_record_has(const struct ftcc_record *rec, uint32_t id)
{
	return id < FTCC_MAX_MEMBERS && (rec->contrib[id / 8] >> (id % 8) & 1);
}

/* Static name of an FTCC_ERR_* value. */
FTCC_API const char *ftcc_strerror(int err);
/* The library's version as FTCC_VERSION_CODE(major, minor, patch); a program built against
 * another major version than the library's should not call on. */
FTCC_API int ftcc_version(void);

/* What the communicator's last failure was, in words ("" if none). Valid until the next call
 * on @comm. */
FTCC_API const char *ftcc_comm_last_error(ftcc_comm_t *comm);

#ifdef __cplusplus
}
#endif

#endif
