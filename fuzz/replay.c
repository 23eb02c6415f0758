// SPDX-License-Identifier: GPL-2.0-only
/* Replay fuzz inputs without libFuzzer: each file named on the command line
 * (directories: every regular file in them) goes once through
 * LLVMFuzzerTestOneInput. Linked with one harness and built with any
 * compiler plus ASan/UBSan, it turns a corpus of crashers into a regression
 * test: exit status 0 means every input ran without a sanitizer report. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0, n;

	if (!f) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return 1;
	}
	for (;;) {
		if (len == cap) {
			uint8_t *v;
			cap = cap ? cap * 2 : 4096;
			v = realloc(buf, cap);
			if (!v) {
				fclose(f);
				free(buf);
				fprintf(stderr, "replay: %s: out of memory\n", path);
				return 1;
			}
			buf = v;
		}
		n = fread(buf + len, 1, cap - len, f);
		if (n == 0)
			break;
		len += n;
	}
	fclose(f);
	/* an exactly sized copy, so reads past the input are caught */
	{
		uint8_t *exact = malloc(len ? len : 1);
		if (!exact) {
			free(buf);
			return 1;
		}
		memcpy(exact, buf, len);
		free(buf);
		fprintf(stderr, "replay: %s (%zu bytes)\n", path, len);
		LLVMFuzzerTestOneInput(exact, len);
		free(exact);
	}
	return 0;
}

static int replay_path(const char *path)
{
	struct stat st;
	struct dirent **names;
	int n, failed = 0;

	if (stat(path, &st) != 0) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return 1;
	}
	if (!S_ISDIR(st.st_mode))
		return replay_file(path);
	n = scandir(path, &names, NULL, alphasort);
	if (n < 0) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return 1;
	}
	for (int i = 0; i < n; i++) {
		char *sub;
		if (names[i]->d_name[0] != '.' &&
		    asprintf(&sub, "%s/%s", path, names[i]->d_name) >= 0) {
			if (stat(sub, &st) == 0 && S_ISREG(st.st_mode))
				failed |= replay_file(sub);
			free(sub);
		}
		free(names[i]);
	}
	free(names);
	return failed;
}

int main(int argc, char **argv)
{
	int failed = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
		return 2;
	}
	for (int i = 1; i < argc; i++)
		failed |= replay_path(argv[i]);
	return failed;
}
