/* SPDX-License-Identifier: BSD-3-Clause */
/* Fuzz target for the ib transport's side-channel messages and handle (transport/ib/wire.c):
 * decodes the input raw and with magic and version repaired (so random input reaches the field
 * checks), checks what decode must refuse, and re-encodes every accepted message into the
 * same fields, checked with abort(). A build without the ib transport has nothing to fuzz.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef FTCC_HAVE_IB
#include "ftcc/ib.h"
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			abort();                                                                   \
	} while (0)

#ifdef FTCC_HAVE_IB
#define OFF_NQPS 120
#define OFF_QPS 121

static void check_one(const uint8_t *buf, size_t len)
{
	struct ib_msg m, back;
	uint8_t enc[IB_MSG_MAX];
	int rc = ib_msg_decode(buf, len, &m);

	if (rc) {
		CHECK(rc == -EBADMSG || rc == -EPROTO);
		return;
	}
	/* Accepted: a known type, a count within bounds, exactly the bytes it announces. */
	CHECK(m.type >= IB_MSG_HELLO && m.type <= IB_MSG_ERROR);
	CHECK(m.port.nqps <= IB_MAX_QPS);
	CHECK(len == OFF_QPS + (size_t)m.port.nqps * 8);
	for (int q = 0; q < m.port.nqps; q++)
		CHECK(m.port.qpn[q] <= 0xffffff && m.port.psn[q] <= 0xffffff);
	size_t n = ib_msg_encode(&m, enc);
	CHECK(n == len);
	CHECK(ib_msg_decode(enc, n, &back) == 0);
	CHECK(memcmp(&back, &m, sizeof(m)) == 0);
}
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
#ifdef FTCC_HAVE_IB
	uint8_t buf[IB_MSG_MAX + 64];
	size_t len = size < sizeof(buf) ? size : sizeof(buf);

	check_one(data, size);
	if (size >= 128) {
		int rc = ib_handle_check(data);
		CHECK(rc == 0 || rc == -EINVAL || rc == -EPROTO);
	}
	/* Repaired: magic and version right, the count made consistent with the length. */
	memcpy(buf, data, len);
	if (len >= OFF_QPS) {
		buf[0] = 0x46, buf[1] = 0x49, buf[2] = 0x42, buf[3] = 0x43; /* "FIBC" */
		buf[4] = 1, buf[5] = 0;
		buf[OFF_NQPS] = (uint8_t)((len - OFF_QPS) / 8);
		len = OFF_QPS + (size_t)buf[OFF_NQPS] * 8;
		check_one(buf, len);
	}
#else
	(void)data;
	(void)size;
#endif
	return 0;
}
