/* SPDX-License-Identifier: BSD-3-Clause */
/* Transport registry and the -EOPNOTSUPP stubs that fill every op a transport leaves NULL,
 * so callers never test for NULL.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "ftcc/log.h"
#include "ftcc/settings.h"
#include "ftcc/transport.h"

extern const struct ftcc_transport_ops tcp_ops;

static int stub_init(void)
{
	return -EOPNOTSUPP;
}

static void stub_fini(void)
{
}

static int stub_devices(int *ndev)
{
	*ndev = 0;
	return -EOPNOTSUPP;
}

static int stub_get_properties(int dev, struct ftcc_dev_props *p)
{
	return -EOPNOTSUPP;
}

static int stub_listen(const struct ftcc_tctx *ctx, int dev, void *h, struct ftcc_listen **out)
{
	*out = NULL;
	return -EOPNOTSUPP;
}

static int stub_connect(const struct ftcc_tctx *ctx, int dev, void *h, struct ftcc_conn **out)
{
	*out = NULL;
	return -EOPNOTSUPP;
}

static int stub_accept(struct ftcc_listen *l, struct ftcc_conn **out)
{
	*out = NULL;
	return -EOPNOTSUPP;
}

static int stub_reg_mr(struct ftcc_conn *c, void *d, size_t s, int t, void **mh)
{
	*mh = NULL;
	return -EOPNOTSUPP;
}

static int stub_reg_mr_dmabuf(struct ftcc_conn *c, void *d, size_t s, int t, uint64_t o, int fd,
			      void **mh)
{
	*mh = NULL;
	return -EOPNOTSUPP;
}

static int stub_dereg_mr(struct ftcc_conn *c, void *mh)
{
	return -EOPNOTSUPP;
}

static int stub_isend(struct ftcc_conn *c, void *d, size_t s, int t, void *mh, struct ftcc_req **r)
{
	*r = NULL;
	return -EOPNOTSUPP;
}

static int stub_irecv(struct ftcc_conn *c, int n, void **d, const size_t *s, const int *t,
		      void **mh, struct ftcc_req **r)
{
	*r = NULL;
	return -EOPNOTSUPP;
}

static int stub_iflush(struct ftcc_conn *c, int n, void **d, const int *s, void **mh,
		       struct ftcc_req **r)
{
	*r = NULL;
	return -EOPNOTSUPP;
}

static int stub_test(struct ftcc_req *r, int *done, size_t *sizes)
{
	*done = 0;
	return -EOPNOTSUPP;
}

static int stub_close_conn(struct ftcc_conn *c)
{
	return -EOPNOTSUPP;
}

static int stub_close_listen(struct ftcc_listen *l)
{
	return -EOPNOTSUPP;
}

static int stub_describe_peer(struct ftcc_conn *c, char *buf, size_t len)
{
	if (len)
		buf[0] = '\0';
	return -EOPNOTSUPP;
}

/* Positional on purpose: a new op without a stub here fails the build
 * (-Wmissing-field-initializers). */
static const struct ftcc_transport_ops stub_ops = {
	"stub",		 stub_init,	    stub_fini,		stub_devices, stub_get_properties,
	stub_listen,	 stub_connect,	    stub_accept,	stub_reg_mr,  stub_reg_mr_dmabuf,
	stub_dereg_mr,	 stub_isend,	    stub_irecv,		stub_iflush,  stub_test,
	stub_close_conn, stub_close_listen, stub_describe_peer,
};

#define FILL(op) dst->op = src->op ? src->op : stub_ops.op

void ftcc_transport_fill_stubs(struct ftcc_transport_ops *dst, const struct ftcc_transport_ops *src)
{
	dst->name = src->name;
	FILL(init);
	FILL(fini);
	FILL(devices);
	FILL(get_properties);
	FILL(listen);
	FILL(connect);
	FILL(accept);
	FILL(reg_mr);
	FILL(reg_mr_dmabuf);
	FILL(dereg_mr);
	FILL(isend);
	FILL(irecv);
	FILL(iflush);
	FILL(test);
	FILL(close_conn);
	FILL(close_listen);
	FILL(describe_peer);
}

static struct ftcc_transport_ops tcp_filled;
static pthread_once_t tcp_once = PTHREAD_ONCE_INIT;

static void fill_tcp(void)
{
	ftcc_transport_fill_stubs(&tcp_filled, &tcp_ops);
}

#ifdef FTCC_HAVE_IB
extern const struct ftcc_transport_ops ib_ops;
static struct ftcc_transport_ops ib_filled;
static pthread_once_t ib_once = PTHREAD_ONCE_INIT;

static void fill_ib(void)
{
	ftcc_transport_fill_stubs(&ib_filled, &ib_ops);
}
#endif

const struct ftcc_transport_ops *ftcc_transport_get(const char *name)
{
	if (name && strcmp(name, "tcp") == 0) {
		pthread_once(&tcp_once, fill_tcp);
		return &tcp_filled;
	}
#ifdef FTCC_HAVE_IB
	if (name && strcmp(name, "ib") == 0) {
		pthread_once(&ib_once, fill_ib);
		return &ib_filled;
	}
#endif
	return NULL;
}

const struct ftcc_transport_ops *ftcc_transport_pick(int *held)
{
	const char *want = ftcc_setting_str(FTCC_SET_TRANSPORT);
	const struct ftcc_transport_ops *ib = ftcc_transport_get("ib");
	const struct ftcc_transport_ops *tcp = ftcc_transport_get("tcp");
	int n = 0;

	if (held)
		*held = 0;
	if (strcmp(want, "tcp") == 0)
		return tcp;
	if (!ib) {
		if (strcmp(want, "ib") == 0) {
			ftcc_warn("FTCC_TRANSPORT=ib, but this build has no InfiniBand transport "
				  "(built without libibverbs-dev)");
			return NULL;
		}
		return tcp;
	}
	if (ib->init() == 0) {
		ib->devices(&n);
		if (n > 0 && held) { /* the caller's reference: discovery and threads start once */
			*held = 1;
			return ib;
		}
		ib->fini();
	}
	if (n > 0)
		return ib;
	if (strcmp(want, "ib") == 0) {
		ftcc_warn("FTCC_TRANSPORT=ib, but no active InfiniBand or RoCE port was found "
			  "(libibverbs missing, no HCA, ports down or excluded by FTCC_IB_HCA)");
		return NULL;
	}
	return tcp;
}
