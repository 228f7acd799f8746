/* SPDX-License-Identifier: BSD-3-Clause */
/* The scheduling watch (sched_watch.h). */
#define _GNU_SOURCE
#include "sched_watch.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "chaos_proc.h"

#define WATCH_PERIOD_MS 10

static char watch_who[32];
static int watch_min_ms;

/* The machine's steal time so far in clock ticks (the 8th field of /proc/stat's "cpu" line);
 * -1 when it cannot be read. */
static long long steal_ticks(void)
{
	long long f[8] = { 0 };
	FILE *fp = fopen("/proc/stat", "re");
	int n;

	if (!fp)
		return -1;
	n = fscanf(fp, "cpu %lld %lld %lld %lld %lld %lld %lld %lld", &f[0], &f[1], &f[2], &f[3],
		   &f[4], &f[5], &f[6], &f[7]);
	fclose(fp);
	return n == 8 ? f[7] : -1;
}

static void *watch_main(void *arg)
{
	struct timespec period = { 0, WATCH_PERIOD_MS * 1000000L };
	long tick_ms = 1000 / sysconf(_SC_CLK_TCK);
	int64_t last = chaos_now_ns(), read_at = last;
	long long steal = steal_ticks();

	(void)arg;
	for (;;) {
		int64_t now;
		double late;

		nanosleep(&period, NULL);
		now = chaos_now_ns();
		late = chaos_ms(last, now) - WATCH_PERIOD_MS;
		if (late >= watch_min_ms) {
			long long s = steal_ticks();
			char line[200];
			int len = snprintf(line, sizeof(line),
					   "%s %lld.%03lld sched watch: woke %.0f ms late (steal "
					   "time since %.0f ms before, summed over the machine's "
					   "CPUs: %lld ms)\n",
					   watch_who, (long long)(now / 1000000),
					   (long long)(now / 1000 % 1000), late,
					   chaos_ms(read_at, now),
					   s >= 0 && steal >= 0 ? (s - steal) * tick_ms : -1);

			if (len > (int)sizeof(line) - 1)
				len = (int)sizeof(line) - 1;
			if (len > 0 && write(STDERR_FILENO, line, (size_t)len) < 0)
				break;
			steal = s;
			read_at = now;
		} else if (chaos_ms(read_at, now) >= 1000) {
			steal = steal_ticks();
			read_at = now;
		}
		last = now;
	}
	return NULL;
}

int sched_watch_start(const char *who, int min_ms)
{
	pthread_attr_t attr;
	pthread_t t;
	int rc;

	snprintf(watch_who, sizeof(watch_who), "%s", who);
	watch_min_ms = min_ms;
	if (pthread_attr_init(&attr))
		return -1;
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&t, &attr, watch_main, NULL);
	pthread_attr_destroy(&attr);
	return rc ? -1 : 0;
}
