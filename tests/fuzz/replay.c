/* Runs a fuzz target's LLVMFuzzerTestOneInput over every file of the corpus
 * directories given, without libFuzzer: the seeds, and any crash a fuzzing
 * run found (saved into corpus/<target>/), become regression tests of every
 * build, sanitizer builds included. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	unsigned char *buf;
	long n;

	if (!f)
		return -1;
	if (fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
		fclose(f);
		return -1;
	}
	buf = malloc((size_t)n + 1);
	if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		fclose(f);
		return -1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, (size_t)n);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	char path[4096];
	struct dirent *e;
	int i, n = 0;
	DIR *d;

	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	for (i = 1; i < argc; i++) {
		d = opendir(argv[i]);
		if (!d) {
			fprintf(stderr, "cannot open %s\n", argv[i]);
			return 1;
		}
		while ((e = readdir(d))) {
			if (e->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
			if (run_file(path)) {
				fprintf(stderr, "cannot read %s\n", path);
				closedir(d);
				return 1;
			}
			n++;
		}
		closedir(d);
	}
	printf("%d inputs replayed\n", n);
	return n ? 0 : 1;
}
