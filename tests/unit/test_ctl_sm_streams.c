/* SPDX-License-Identifier: BSD-3-Clause */
/* Streams in the membership state machines (fake network): a group whose members run several
 * independent op sequences gets a boundary per stream in every epoch, computed from each
 * stream's own progress; a joiner gets a first op per stream; the fence of an open proposal
 * holds per stream; a takeover keeps all of it; and a member with another number of streams is
 * refused.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "ctl_fakenet.h"
#include "ftcc/ctl_sm.h"

#define NS 3

static struct fn *formed_s(uint32_t n, int daemon)
{
	struct fn_cfg cfg = { .sizes = { n }, .nstreams = NS, .daemon = daemon };
	struct fn *fn = fn_new(&cfg);

	fn_form(fn, 2000);
	fn_run(fn, 300);
	return fn;
}

/* Each stream's progress differs, in order and in skew: stream 1 far ahead, stream 2 barely
 * started. */
static const uint64_t next_s[NS][5] = {
	{ 50, 47, 60, 55, 49 },
	{ 900, 1200, 1000, 950, 1100 },
	{ 3, 2, 4, 9, 3 },
};
static const uint64_t done_s[NS][5] = {
	{ 40, 35, 52, 20, 44 },
	{ 890, 1190, 999, 700, 1050 },
	{ 1, 2, 3, 0, 2 },
};

static uint64_t stayers_min_done(uint32_t t, int gone)
{
	uint64_t lo = UINT64_MAX;

	for (int k = 0; k < 5; k++) {
		if (k != gone && done_s[t][k] < lo) {
			lo = done_s[t][k];
		}
	}
	return lo;
}

static void report_all(struct fn *fn, int skip)
{
	for (int k = 0; k < 5; k++) {
		for (uint32_t t = 0; t < NS && k != skip; t++) {
			fn_progress_s(fn, k, t, next_s[t][k], done_s[t][k]);
		}
	}
}

/* A removal reopens each stream from its own lowest op not done by a survivor. */
static void removal_boundaries(int daemon)
{
	struct fn *fn = formed_s(5, daemon);
	const struct ctl_epoch_rec *v;
	int fenced;

	report_all(fn, -1);
	fn_run(fn, 300);
	fn_kill(fn, 3);
	cr_assert_eq(FN_WAIT_VIEW(fn, 0x17, 2000, 0, 1, 2, 4), 0);
	for (int k = 0; k < 5; k++) {
		if (k == 3) {
			continue;
		}
		v = fn_view(fn, k);
		for (uint32_t t = 0; t < NS; t++) {
			uint64_t want = stayers_min_done(t, 3);

			cr_expect_eq(ctl_epoch_rec_boundary(v, t), want,
				     "member %d stream %u: boundary %llu, want %llu", k, t,
				     (unsigned long long)ctl_epoch_rec_boundary(v, t),
				     (unsigned long long)want);
			if (want > 0) {
				cr_expect_eq(ctl_msm_op_epoch_s(fn_msm(fn, k), t, want - 1, &fenced)
						     ->epoch,
					     v->epoch - 1);
			}
			cr_expect_eq(ctl_msm_op_epoch_s(fn_msm(fn, k), t, want, &fenced)->epoch,
				     v->epoch);
			cr_expect_eq(fenced, 0);
		}
		/* no such stream: nothing, whatever the op */
		cr_expect_null(ctl_msm_op_epoch_s(fn_msm(fn, k), NS, 0, &fenced));
	}
	FN_CHECK(fn);
	fn_free(fn);
}

Test(ctl_sm_streams, boundary_per_stream_when_removing)
{
	removal_boundaries(0);
}

Test(ctl_sm_streams, boundary_per_stream_when_removing_with_a_daemon)
{
	removal_boundaries(1);
}

/* A joiner starts each stream past every stayer's next op of that stream (plus the slack), and
 * keeps those starts when the coordinator's host dies and another member takes over. */
Test(ctl_sm_streams, joiner_starts_per_stream_and_a_takeover_keeps_them)
{
	struct fn *fn = formed_s(5, 0);
	const struct ctl_epoch_rec *v;
	uint64_t want[NS], e_join;
	int fenced, self;

	fn_kill(fn, 3);
	cr_assert_eq(FN_WAIT_VIEW(fn, 0x17, 2000, 0, 1, 2, 4), 0);
	report_all(fn, 3);
	fn_run(fn, 300);
	fn_restart(fn, 3, 0);
	cr_assert_eq(FN_WAIT_VIEW(fn, FN_ALL(5), 3000, 0, 1, 2, 3, 4), 0);
	v = fn_view(fn, 0);
	e_join = v->epoch;
	for (uint32_t t = 0; t < NS; t++) {
		want[t] = 0;
		for (int k = 0; k < 5; k++) {
			if (k != 3 && next_s[t][k] + CTL_JOIN_SLACK > want[t]) {
				want[t] = next_s[t][k] + CTL_JOIN_SLACK;
			}
		}
		cr_expect_eq(ctl_epoch_rec_boundary(v, t), want[t], "stream %u: boundary %llu", t,
			     (unsigned long long)ctl_epoch_rec_boundary(v, t));
		cr_expect_eq(ctl_msm_admitted_s(fn_msm(fn, 3), t), want[t],
			     "stream %u: joiner admitted at %llu, want %llu", t,
			     (unsigned long long)ctl_msm_admitted_s(fn_msm(fn, 3), t),
			     (unsigned long long)want[t]);
		cr_expect_eq(ctl_msm_op_epoch_s(fn_msm(fn, 3), t, want[t], &fenced)->epoch, e_join);
	}
	/* the members' progress goes on, the joiner's from its starts */
	for (int k = 0; k < 5; k++) {
		for (uint32_t t = 0; t < NS; t++) {
			fn_progress_s(fn, k, t, want[t] + 10 + (uint64_t)k, want[t] + 5);
		}
	}
	fn_run(fn, 300);
	fn_kill(fn, 0); /* the host: member 1 takes over */
	cr_assert_eq(FN_WAIT_VIEW(fn, 0x1e, 4000, 1, 2, 3, 4), 0);
	v = fn_view(fn, 1);
	cr_expect_gt(v->epoch, e_join);
	self = -1;
	for (uint32_t i = 0; i < v->nmembers; i++) {
		if (v->members[i].id == 3) {
			self = (int)i;
		}
	}
	cr_assert_geq(self, 0);
	for (uint32_t t = 0; t < NS; t++) {
		uint64_t start = t ? v->members[self].xstart[t - 1] : v->members[self].start;

		cr_expect_eq(start, want[t],
			     "stream %u: the joiner's start %llu after the takeover", t,
			     (unsigned long long)start);
		cr_expect_eq(ctl_epoch_rec_boundary(v, t), want[t] + 5,
			     "stream %u: takeover boundary %llu, want %llu", t,
			     (unsigned long long)ctl_epoch_rec_boundary(v, t),
			     (unsigned long long)(want[t] + 5));
	}
	FN_CHECK(fn);
	fn_free(fn);
}

/* A link that fails in two streams is one streak: stream 0's op keeps failing while stream 1's
 * ops fail and then get through after their retries. The streak is settled only once every
 * member has done the failed op of every stream it failed in, so stream 1's recoveries do not
 * settle stream 0's failure: the link counts as broken after the failure timeout, and the cut
 * rule removes one of its ends. */
Test(ctl_sm_streams, a_link_failing_in_two_streams_is_one_streak)
{
	struct fn_cfg cfg = { .sizes = { 3 }, .nstreams = 2 };
	struct fn *fn = fn_new(&cfg);
	uint64_t op1 = 7;
	int gone = 0;

	fn_form(fn, 2000);
	fn_run(fn, 300);
	for (int k = 0; k < 3; k++) {
		fn_progress_s(fn, k, 0, 101, 100);
		fn_progress_s(fn, k, 1, op1 + 1, op1);
	}
	for (int t = 0; t < 40 && !gone; t++) {
		fn_suspect_s(fn, 1, 2, CTL_EV_LINK, 0, 100);
		if (t % 3 == 1) {
			/* stream 1 fails at its next op, which its retry then gets through */
			fn_suspect_s(fn, 1, 2, CTL_EV_LINK, 1, op1);
			fn_run(fn, 20);
			op1++;
			for (int k = 0; k < 3; k++) {
				if (fn_state(fn, k) == CTL_M_ACTIVE) {
					fn_progress_s(fn, k, 1, op1 + 1, op1);
				}
			}
		}
		fn_run(fn, 100);
		gone = fn_state(fn, 1) != CTL_M_ACTIVE || fn_state(fn, 2) != CTL_M_ACTIVE;
	}
	cr_expect(gone,
		  "the link between members 1 and 2 failed in stream 0 for %d ms and "
		  "nobody was removed",
		  40 * 100);
	cr_expect_eq(fn_state(fn, 0), CTL_M_ACTIVE);
	FN_CHECK(fn);
	fn_free(fn);
}

/* A one-way cut between members 1 and 2 that member 2 meets while its op of stream 0 is in
 * flight, and member 1 in stream 1, where member 2 has not issued the op: its ops of stream 1
 * wait behind its blocked op of stream 0 (an application bounds its ops in flight). Member 1
 * reports member 2 unreachable in stream 1 every 100 ms, as a member waiting for an epoch does;
 * member 2 is idle in stream 1 there, a straggler, which counts nothing. The stream 0 op sees
 * the cut only after half the failure timeout of one attempt (its data unacknowledged; once
 * seen, at once in every later attempt, the data staying unacknowledged on the connection),
 * and each epoch restarts it. A retry per straggler report restarted it before it could ever
 * tell: retry epochs forever, and the group never got past the cut. Held until the accused
 * issues the op (or for the failure timeout), the stream 0 op gets its half timeout, its
 * reports count, and the cut rule removes one end of the link. */
Test(ctl_sm_streams, a_straggler_in_one_stream_holds_no_cut_in_another_from_its_verdict)
{
	struct fn_cfg cfg = { .sizes = { 3 }, .nstreams = 2, .timeout_ms = 1000 };
	struct fn *fn = fn_new(&cfg);
	uint64_t e = 0, since = 0;
	int gone = 0, epochs = 0, seen = 0;

	fn_form(fn, 2000);
	fn_run(fn, 300);
	for (int k = 0; k < 3; k++) {
		fn_progress_s(fn, k, 0, 12, k == 2 ? 9 : 12); /* member 2 in op 9 of stream 0 */
		fn_progress_s(fn, k, 1, k == 2 ? 4 : 5, 4);   /* and idle in stream 1 */
	}
	fn_run(fn, 200);
	for (int t = 0; t < 100 && !gone; t++) {
		uint64_t now = fn_now(fn), cur = fn_max_epoch(fn, 0);

		if (cur != e) { /* a new attempt of every op in flight */
			e = cur;
			since = now;
			epochs++;
		}
		fn_suspect_s(fn, 1, 2, CTL_EV_CUT, 1, 4);
		seen |= now - since >=
			cfg.timeout_ms / 2; /* an attempt lived long enough to tell */
		if (seen)
			fn_suspect_s(fn, 1, 2, CTL_EV_LINK, 0, 9);
		fn_run(fn, 100);
		gone = fn_state(fn, 1) != CTL_M_ACTIVE || fn_state(fn, 2) != CTL_M_ACTIVE;
	}
	cr_expect(gone, "a cut in stream 0 for %d ms, %d epochs, nobody removed", 100 * 100,
		  epochs);
	/* one end of the link goes, by the cut rule the higher id */
	cr_expect_eq(fn_state(fn, 2), CTL_M_REMOVED);
	cr_expect_eq(fn_state(fn, 1), CTL_M_ACTIVE);
	cr_expect_eq(fn_state(fn, 0), CTL_M_ACTIVE);
	FN_CHECK(fn);
	fn_free(fn);
}

/* A straggler in two streams: member 1 waits for member 2 in op 96 of stream 0 and op 40 of
 * stream 1, and repeats its report of each every 100 ms until an epoch comes. Member 2 issues
 * stream 0's op, and stays idle in stream 1: the repeats of the stream 0 report, as old as the
 * first, still count nothing (remembered per stream and direction, not as the link's latest
 * report, which the stream 1 repeats kept replacing), and nobody is removed. */
Test(ctl_sm_streams, repeats_of_a_straggler_report_in_two_streams_count_nothing)
{
	struct fn_cfg cfg = { .sizes = { 3 }, .nstreams = 2, .timeout_ms = 1000 };
	struct fn *fn = fn_new(&cfg);
	uint64_t e0;

	fn_form(fn, 2000);
	fn_run(fn, 300);
	for (int k = 0; k < 3; k++) {
		fn_progress_s(fn, k, 0, k == 2 ? 96 : 100, 96);
		fn_progress_s(fn, k, 1, k == 2 ? 40 : 41, 40);
	}
	fn_run(fn, 300);
	e0 = fn_max_epoch(fn, 0);
	for (int t = 0; t < 40; t++) {
		if (t == 3) /* member 2 issues stream 0's op; stream 1's it does not */
			fn_progress_s(fn, 2, 0, 97, 96);
		if (fn_max_epoch(fn, 0) == e0) { /* the reports of an attempt, until its epoch */
			fn_suspect_s(fn, 1, 2, CTL_EV_CUT, 0, 96);
			fn_suspect_s(fn, 1, 2, CTL_EV_CUT, 1, 40);
		}
		fn_run(fn, 50);
	}
	cr_expect_gt(fn_max_epoch(fn, 0), e0, "no retry epoch");
	for (int k = 0; k < 3; k++)
		cr_expect_eq(fn_state(fn, k), CTL_M_ACTIVE, "member %d", k);
	FN_CHECK(fn);
	fn_free(fn);
}

struct ack_seen {
	int node;
	int seen;
	uint32_t nstreams;
	uint64_t next[NS];
};

static void catch_ack(void *arg, int from, int to, const struct ctl_msg *m)
{
	struct ack_seen *a = arg;

	(void)to;
	if (from == a->node && m->type == CTL_ACK) {
		a->seen = 1;
		a->nstreams = m->nstreams;
		for (uint32_t t = 0; t < NS; t++) {
			a->next[t] = *ctl_msg_next((struct ctl_msg *)m, t);
		}
	}
}

/* Between its ACK of a proposal and the VIEW, a member's ops wait from its reported next op
 * plus the slack, in each stream: a stream far ahead does not fence one behind, nor the other
 * way round. */
Test(ctl_sm_streams, fence_per_stream_while_a_join_is_proposed)
{
	struct fn *fn = formed_s(5, 0);
	struct ack_seen ack = { .node = 2 };
	uint64_t e1;
	int fenced, windows = 0;

	fn_kill(fn, 4);
	cr_assert_eq(FN_WAIT_VIEW(fn, 0xf, 2000, 0, 1, 2, 3), 0);
	e1 = fn_view(fn, 2)->epoch;
	report_all(fn, 4);
	fn_run(fn, 300);
	fn_set_watch(fn, catch_ack, &ack);
	fn_restart(fn, 4, 0);
	for (int i = 0; i < 300 && fn_view(fn, 2)->epoch == e1; i++) {
		fn_step(fn);
		if (!ack.seen || fn_view(fn, 2)->epoch != e1) {
			continue;
		}
		windows++;
		cr_expect_eq(ack.nstreams, NS);
		for (uint32_t t = 0; t < NS; t++) {
			uint64_t fence = next_s[t][2] + CTL_JOIN_SLACK;

			cr_expect_eq(ack.next[t], next_s[t][2], "stream %u: ACK says next %llu", t,
				     (unsigned long long)ack.next[t]);
			ctl_msm_op_epoch_s(fn_msm(fn, 2), t, fence - 1, &fenced);
			cr_expect_eq(fenced, 0, "stream %u: op below the fence fenced", t);
			ctl_msm_op_epoch_s(fn_msm(fn, 2), t, fence, &fenced);
			cr_expect_eq(fenced, 1, "stream %u: op %llu at the fence not fenced", t,
				     (unsigned long long)fence);
		}
	}
	cr_expect_gt(windows, 0, "never saw member 2 between its ACK and the VIEW");
	cr_assert_eq(FN_WAIT_VIEW(fn, FN_ALL(5), 2000, 0, 1, 2, 3, 4), 0);
	for (uint32_t t = 0; t < NS; t++) {
		const struct ctl_epoch_rec *v = fn_view(fn, 2);

		ctl_msm_op_epoch_s(fn_msm(fn, 2), t, ctl_epoch_rec_boundary(v, t) + 5, &fenced);
		cr_expect_eq(fenced, 0, "stream %u still fenced after the VIEW", t);
	}
	FN_CHECK(fn);
	fn_free(fn);
}

/* What a coordinator sent, for the test below. */
struct sent {
	int n;
	struct ctl_msg last;
	char text[CTL_TEXT_MAX];
};

static void sent_cb(void *arg, uint32_t conn, const struct ctl_msg *m)
{
	struct sent *s = arg;

	(void)conn;
	s->n++;
	s->last = *m;
	memcpy(s->text, m->text, sizeof(s->text));
}

static void noop_close(void *arg, uint32_t conn)
{
	(void)arg;
	(void)conn;
}

static void noop_probe(void *arg, uint32_t id, uint64_t incarnation)
{
	(void)arg;
	(void)id;
	(void)incarnation;
}

/* A HELLO with another number of streams than the group's is refused, saying so. */
Test(ctl_sm_streams, a_member_with_other_streams_is_refused)
{
	struct ctl_coord_cfg cfg = { .expected = 2,
				     .host = 0,
				     .timeout_ms = 1000,
				     .hb_ms = 100,
				     .form_timeout_ms = 3000,
				     .nstreams = 2 };
	struct sent s = { 0 };
	struct ctl_coord_ops ops = {
		.arg = &s, .send = sent_cb, .close = noop_close, .probe = noop_probe
	};
	struct ctl_member_rec rec = { .id = 1, .incarnation = 7 };
	struct ctl_msg m = { .type = CTL_HELLO,
			     .member = 1,
			     .incarnation = 7,
			     .expected = 2,
			     .nstreams = 1,
			     .nmembers = 1,
			     .members_cap = 1,
			     .members = &rec };
	struct ctl_coord *c;

	snprintf(cfg.group, sizeof(cfg.group), "g");
	snprintf(m.group, sizeof(m.group), "g");
	m.group_id = ctl_group_id("g");
	c = ctl_coord_create(&cfg, &ops, 1);
	cr_assert_not_null(c);
	ctl_coord_on_msg(c, 5, &m, 2);
	cr_assert_eq(s.n, 1);
	cr_expect_eq(s.last.type, CTL_REFUSE);
	cr_expect_eq(s.last.code, CTL_REF_PROTOCOL);
	cr_expect(strstr(s.text, "1 op streams") && strstr(s.text, "has 2"), "%s", s.text);
	s.n = 0;
	m.nstreams = 2;
	ctl_coord_on_msg(c, 6, &m, 3);
	cr_expect_eq(s.n, 0, "a member with the group's streams was answered: %s", s.text);
	ctl_coord_destroy(c);
}
