/* SPDX-License-Identifier: BSD-3-Clause */
/* Control wire names and ids: the group id hash and the printable names of message types,
 * refusal codes and kinds of evidence. */
#include <criterion/criterion.h>

#include "ftcc/ctl_wire.h"

Test(ctl_wire, group_id_is_fnv1a_64)
{
	/* Published FNV-1a 64 test vectors. */
	cr_expect_eq(ctl_group_id(""), 0xcbf29ce484222325ull);
	cr_expect_eq(ctl_group_id("a"), 0xaf63dc4c8601ec8cull);
	cr_expect_eq(ctl_group_id("foobar"), 0x85944171f73967e8ull);
	cr_expect_neq(ctl_group_id("job-1"), ctl_group_id("job-2"));
}

Test(ctl_wire, names)
{
	cr_expect_str_eq(ctl_type_name(CTL_HELLO), "hello");
	cr_expect_str_eq(ctl_type_name(CTL_REFUSE), "refuse");
	cr_expect_str_eq(ctl_type_name(0), "unknown");
	cr_expect_str_eq(ctl_type_name(CTL_TYPE_MAX + 1), "unknown");
	cr_expect_str_eq(ctl_type_name(~0u), "unknown");
	cr_expect_str_eq(ctl_refuse_name(CTL_REF_NOT_COORD), "not_coord");
	cr_expect_str_eq(ctl_refuse_name(0), "unknown");
	cr_expect_str_eq(ctl_refuse_name(CTL_REF_MAX + 1), "unknown");
	for (unsigned t = 1; t <= CTL_TYPE_MAX; t++) {
		cr_expect_str_neq(ctl_type_name(t), "unknown", "type %u", t);
		for (unsigned u = 1; u < t; u++) {
			cr_expect_str_neq(ctl_type_name(t), ctl_type_name(u));
		}
	}
	cr_expect_str_eq(ctl_evidence_name(CTL_EV_LINK), "link");
	cr_expect_str_eq(ctl_evidence_name(0), "unknown");
	cr_expect_str_eq(ctl_evidence_name(CTL_EV_MAX + 1), "unknown");
	for (unsigned c = 1; c <= CTL_REF_MAX; c++) {
		cr_expect_str_neq(ctl_refuse_name(c), "unknown", "code %u", c);
		for (unsigned u = 1; u < c; u++) {
			cr_expect_str_neq(ctl_refuse_name(c), ctl_refuse_name(u));
		}
	}
}
