/* SPDX-License-Identifier: BSD-3-Clause */
/* The one translation from ftcc's internal errors (0 or a negative errno) to ncclResult_t.
 *
 * NCCL treats any non-success code from the data path as fatal for the communicator and hands
 * the exact code to the application, so the mapping is deliberate: peer loss must read as
 * ncclRemoteError ("remote process exited or there was a network error").
 */
#include <errno.h>
#include <string.h>

#include "ftcc/log.h"
#include "plugin.h"

static const char *result_name(ncclResult_t res)
{
	switch (res) {
	case ncclSuccess:
		return "ncclSuccess";
	case ncclSystemError:
		return "ncclSystemError";
	case ncclInternalError:
		return "ncclInternalError";
	case ncclInvalidUsage:
		return "ncclInvalidUsage";
	case ncclRemoteError:
		return "ncclRemoteError";
	default:
		return "ncclResult?";
	}
}

/* Maps a positive errno value; see plugin_result(). */
static ncclResult_t result_of_errno(int e)
{
	switch (e) {
	case 0:
		return ncclSuccess;
	/* The peer or the path to it is gone: evidence of death or silence past the timeout. */
	case ECONNRESET:
	case ETIMEDOUT:
	case EPIPE:
	case ECONNREFUSED:
	case ENOTCONN:
	case EHOSTUNREACH:
	case ECONNABORTED:
		return ncclRemoteError;
	/* The caller broke the contract: bad handle, truncation, garbage on the wire. */
	case EINVAL:
	case EMSGSIZE:
	case EBADMSG:
	case EPROTO:
		return ncclInvalidUsage;
	/* NCCL called something this transport does not provide (a stubbed op). */
	case EOPNOTSUPP:
	case ENOSYS:
		return ncclInternalError;
	/* ENOMEM and every other OS failure. */
	default:
		return ncclSystemError;
	}
}

ncclResult_t plugin_result(int err, const char *op)
{
	if (err == 0)
		return ncclSuccess;
	/* A positive value is a bug below us; translate its magnitude rather than succeed. */
	int e = err < 0 ? -err : err;
	ncclResult_t res = result_of_errno(e);
	/* INFO, not WARN: the transport already warned about a lost peer with its name, and a
	 * misuse is NCCL's to report. This line ties the code NCCL sees to the call that made
	 * it. */
	ftcc_info("%s failed: %s (errno %d) -> %s", op ? op : "?", strerror(e), e,
		  result_name(res));
	return res;
}
