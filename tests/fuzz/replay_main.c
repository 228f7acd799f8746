/* SPDX-License-Identifier: BSD-3-Clause */
/* A main for fuzz targets built without libFuzzer (any compiler, any build).
 *
 * Feeds LLVMFuzzerTestOneInput every file named on the command line (directories: every regular
 * file in them, in name order), then with -runs=N that many pseudo-random inputs from -seed=S.
 * The same seed always gives the same inputs, so a failure found here reproduces.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

/* Options, named as libFuzzer names them so one command line serves both. */
struct replay_opts {
	unsigned long runs;
	uint64_t seed;
	size_t max_len;
};

static size_t replay_files;

/* Reads all of @path and runs it. 0, or -1 (message printed) when it cannot be read. */
static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0;

	if (!f) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	for (;;) {
		if (len == cap) {
			cap = cap ? cap * 2 : 4096;
			uint8_t *grown = realloc(buf, cap);
			if (!grown) {
				fprintf(stderr, "replay: %s: out of memory\n", path);
				free(buf);
				fclose(f);
				return -1;
			}
			buf = grown;
		}
		size_t n = fread(buf + len, 1, cap - len, f);
		len += n;
		if (n == 0)
			break;
	}
	int err = ferror(f);
	fclose(f);
	if (err) {
		fprintf(stderr, "replay: %s: read error\n", path);
		free(buf);
		return -1;
	}
	/* An exact-size copy, so that ASan catches a read one byte past the input. */
	uint8_t *exact = malloc(len ? len : 1);
	if (!exact) {
		free(buf);
		return -1;
	}
	memcpy(exact, buf, len);
	free(buf);
	LLVMFuzzerTestOneInput(exact, len);
	free(exact);
	replay_files++;
	return 0;
}

static int replay_name_cmp(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

/* Runs every regular file directly inside @dir. */
static int replay_dir(const char *dir)
{
	struct dirent **names;
	int n = scandir(dir, &names, NULL, replay_name_cmp);
	int ret = 0;

	if (n < 0) {
		fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
		return -1;
	}
	for (int i = 0; i < n; i++) {
		char path[4096];
		struct stat st;

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name);
		if (ret == 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode))
			ret = replay_file(path);
		free(names[i]);
	}
	free(names);
	return ret;
}

/* splitmix64: small, and good enough to spread inputs over lengths and byte values. */
static uint64_t replay_next(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Random input @i of the run; depends only on (seed, i). Half are short, where parsers
 * keep most of their edge cases. */
static void replay_random(const struct replay_opts *o, unsigned long i)
{
	uint64_t state = o->seed ^ (0x5851f42d4c957f2dull * (i + 1));
	uint64_t r = replay_next(&state);
	size_t limit = (r & 1) ? o->max_len : (o->max_len < 64 ? o->max_len : 64);
	size_t len = (size_t)(replay_next(&state) % (limit + 1));

	/* An exact-size block, for the same reason as in replay_file(). */
	uint8_t *exact = malloc(len ? len : 1);
	if (!exact)
		abort();
	for (size_t k = 0; k < len; k++)
		exact[k] = (uint8_t)replay_next(&state);
	LLVMFuzzerTestOneInput(exact, len);
	free(exact);
}

/* Parses "-NAME=VALUE" into @o. 1 if it was an option, 0 if not, -1 if malformed. */
static int replay_option(const char *arg, struct replay_opts *o)
{
	static const char *const names[] = { "-runs=", "-seed=", "-max_len=" };
	char *end;

	if (arg[0] != '-')
		return 0;
	for (int i = 0; i < 3; i++) {
		size_t n = strlen(names[i]);
		if (strncmp(arg, names[i], n) != 0)
			continue;
		errno = 0;
		unsigned long long v = strtoull(arg + n, &end, 10);
		if (errno || end == arg + n || *end)
			return -1;
		if (i == 0)
			o->runs = (unsigned long)v;
		else if (i == 1)
			o->seed = v;
		else
			o->max_len = (size_t)v;
		return 1;
	}
	/* Other libFuzzer options (-max_total_time=...) mean nothing here. */
	fprintf(stderr, "replay: ignoring option %s\n", arg);
	return 1;
}

int main(int argc, char **argv)
{
	struct replay_opts o = { .runs = 0, .seed = 1, .max_len = 4096 };

	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	for (int i = 1; i < argc; i++) {
		if (replay_option(argv[i], &o) < 0) {
			fprintf(stderr,
				"usage: %s [-runs=N] [-seed=S] [-max_len=L] [file|dir]...\n",
				argv[0]);
			return 2;
		}
	}
	for (int i = 1; i < argc; i++) {
		if (argv[i][0] == '-')
			continue;
		struct stat st;
		int ret = stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode) ? replay_dir(argv[i]) :
									   replay_file(argv[i]);
		if (ret)
			return 1;
	}
	for (unsigned long i = 0; i < o.runs; i++)
		replay_random(&o, i);
	printf("replay: %zu files, %lu random inputs (seed %llu), no crash\n", replay_files, o.runs,
	       (unsigned long long)o.seed);
	return 0;
}
