/* SPDX-License-Identifier: BSD-3-Clause */
/* Basic NCCL types shared by every plug-in ABI version: result codes, data types, reduction
 * operators, the logger NCCL hands to init and the profiler callback.
 *
 * Our own declarations of NCCL's documented ABI (values as in NCCL 2.28's nccl.h and
 * nccl_common.h). Only plugin/ (and the ABI tests) include this: the rest of ftcc speaks
 * negative errno and never sees an NCCL type.
 */
#ifndef FTCC_PLUGIN_NCCL_TYPES_H
#define FTCC_PLUGIN_NCCL_TYPES_H

#include <stddef.h>
#include <stdint.h>

/* Result of every plug-in call. The numeric values are ABI: NCCL stores the code we return
 * and hands it to the application unchanged (ncclCommGetAsyncError). */
typedef enum {
	ncclSuccess = 0,
	ncclUnhandledCudaError = 1,
	ncclSystemError = 2,
	ncclInternalError = 3,
	ncclInvalidArgument = 4,
	ncclInvalidUsage = 5,
	ncclRemoteError = 6,
	ncclInProgress = 7,
	ncclNumResults = 8
} ncclResult_t;

/* Element types, as of NCCL 2.28 (the two fp8 types appeared in 2.24). */
typedef enum {
	ncclInt8 = 0,
	ncclChar = 0,
	ncclUint8 = 1,
	ncclInt32 = 2,
	ncclInt = 2,
	ncclUint32 = 3,
	ncclInt64 = 4,
	ncclUint64 = 5,
	ncclFloat16 = 6,
	ncclHalf = 6,
	ncclFloat32 = 7,
	ncclFloat = 7,
	ncclFloat64 = 8,
	ncclDouble = 8,
	ncclBfloat16 = 9,
	ncclFloat8e4m3 = 10,
	ncclFloat8e5m2 = 11,
	ncclNumTypes = 12
} ncclDataType_t;

/* Built-in reduction operators. Values from ncclNumOps up are user-defined operators made by
 * ncclRedOpCreate*; NCCL pins the enum to int size with the largest signed value, which we
 * repeat so sizeof(ncclRedOp_t) matches. */
typedef enum {
	ncclSum = 0,
	ncclProd = 1,
	ncclMax = 2,
	ncclMin = 3,
	ncclAvg = 4,
	ncclNumOps = 5,
	ncclMaxRedOp = 0x7fffffff
} ncclRedOp_t;

/* Log levels of the logger NCCL passes to init. */
typedef enum {
	NCCL_LOG_NONE = 0,
	NCCL_LOG_VERSION = 1,
	NCCL_LOG_WARN = 2,
	NCCL_LOG_INFO = 3,
	NCCL_LOG_ABORT = 4,
	NCCL_LOG_TRACE = 5
} ncclDebugLogLevel;

/* Subsystem bits (the logger's flags argument); NCCL_DEBUG_SUBSYS filters on them. */
typedef enum {
	NCCL_INIT = 0x1,
	NCCL_COLL = 0x2,
	NCCL_P2P = 0x4,
	NCCL_SHM = 0x8,
	NCCL_NET = 0x10,
	NCCL_GRAPH = 0x20,
	NCCL_TUNING = 0x40,
	NCCL_ENV = 0x80,
	NCCL_ALLOC = 0x100,
	NCCL_CALL = 0x200,
	NCCL_PROXY = 0x400,
	NCCL_NVLS = 0x800,
	NCCL_BOOTSTRAP = 0x1000,
	NCCL_REG = 0x2000,
	NCCL_PROFILE = 0x4000,
	NCCL_RAS = 0x8000,
	NCCL_ALL = ~0
} ncclDebugLogSubSys;

/* NCCL's logger: printf-like, thread-safe, filters by NCCL_DEBUG and NCCL_DEBUG_SUBSYS. */
typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char *file,
				  int line, const char *fmt, ...);

/* Event kinds of the profiler callback's @type argument. */
enum {
	ncclProfilerNetEventStart = 0,
	ncclProfilerNetEventStop = 1,
	ncclProfilerNetEventUpdate = 2,
	ncclProfilerNetEventUpdateAndStop = 3,
};

/* Profiler callback passed to init (v10 and later). @phandle must be exactly the phandle NCCL
 * gave to isend/irecv; @pluginId carries the plug-in type in its upper 16 bits. */
typedef ncclResult_t (*ncclProfilerCallback_t)(void **eHandle, int type, void *phandle,
					       int64_t pluginId, void *extData);

_Static_assert(sizeof(ncclResult_t) == 4, "ncclResult_t is an int-sized enum");
_Static_assert(sizeof(ncclDataType_t) == 4, "ncclDataType_t is an int-sized enum");
_Static_assert(sizeof(ncclRedOp_t) == 4, "ncclRedOp_t is an int-sized enum");
_Static_assert(sizeof(ncclDebugLogLevel) == 4, "ncclDebugLogLevel is an int-sized enum");

#endif
