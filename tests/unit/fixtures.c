// SPDX-License-Identifier: GPL-2.0-only
/* Real btrfs images for the libfs unit tests: built with mkfs.btrfs --rootdir
 * (no root, no kernel), cached across test processes, and loaded into
 * private memory so a test can corrupt them freely. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <btk/block.h>
#include <btk/volumes.h>
#include "tests/unit/fixtures.h"

/* Bump when the recipes or the generated tree change: old caches are ignored. */
#define FIXTURE_VERSION 1
#define IMAGE_PRESIZE (128ULL << 20)
#define SMALL_FILES 3000
#define BIG_FILES 20

/* snprintf into a path buffer; -ENAMETOOLONG instead of a truncated path. */
__attribute__((format(printf, 3, 4))) static int pathf(char *out, size_t len, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(out, len, fmt, ap);
	va_end(ap);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

struct recipe {
	const char *name;
	const char *mkfs_args[6];
	uint64_t size; /* of the image file; 0: IMAGE_PRESIZE */
};

static const struct recipe recipes[] = {
	{ "small", { NULL }, 0 },
	{ "deep", { "--nodesize", "4096", NULL }, 0 },
	{ "xxhash", { "--csum", "xxhash", NULL }, 0 },
	{ "n64k", { "--nodesize", "65536", NULL }, 0 },
	{ "n64k-roomy", { "--nodesize", "65536", "--metadata", "single", NULL }, 640ULL << 20 },
};

static const struct recipe *recipe_by_name(const char *name)
{
	for (size_t i = 0; i < sizeof(recipes) / sizeof(recipes[0]); i++)
		if (!strcmp(recipes[i].name, name))
			return &recipes[i];
	return NULL;
}

/* $TMPDIR/btk-unit-fixtures, created on demand. */
static int fixture_dir(char *out, size_t len)
{
	const char *tmp = getenv("TMPDIR");

	if (!tmp || !*tmp)
		tmp = "/tmp";
	if (pathf(out, len, "%s/btk-unit-fixtures", tmp))
		return -ENAMETOOLONG;
	if (mkdir(out, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* Find an executable in $PATH or the sbin directories an unprivileged PATH lacks. */
static int find_tool(const char *name, char *out, size_t len)
{
	const char *path = getenv("PATH");
	char dirs[4096];

	snprintf(dirs, sizeof(dirs), "%s:/usr/sbin:/sbin:/usr/local/sbin:/usr/bin:/bin",
		 path ? path : "");
	for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		if (!*d)
			continue;
		if (pathf(out, len, "%s/%s", d, name) == 0 && access(out, X_OK) == 0)
			return 0;
	}
	return -ENOENT;
}

/* Run argv with stdout and stderr to files (NULL: /dev/null). Exit status or -errno. */
static int run_tool(char *const argv[], const char *out_path, const char *err_path)
{
	pid_t pid;
	int status;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int in = open("/dev/null", O_RDONLY);
		int out = open(out_path ? out_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int err = open(err_path ? err_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (in < 0 || out < 0 || err < 0)
			_exit(126);
		dup2(in, 0);
		dup2(out, 1);
		dup2(err, 2);
		execv(argv[0], argv);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static char *read_text_file(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t len = 0, cap = 0;

	if (!f)
		return NULL;
	for (;;) {
		size_t n;
		if (cap - len < 65536) {
			char *nb = realloc(buf, cap + 65536 + 1);
			if (!nb) {
				free(buf);
				fclose(f);
				return NULL;
			}
			buf = nb;
			cap += 65536;
		}
		n = fread(buf + len, 1, cap - len, f);
		len += n;
		if (n == 0)
			break;
	}
	fclose(f);
	buf[len] = 0;
	return buf;
}

static int write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	int ret = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, data, len) != (ssize_t)len)
		ret = -EIO;
	close(fd);
	return ret;
}

/* The directory mkfs.btrfs copies in: many small inline files (a wide and,
 * with 4 KiB nodes, deep fs tree) and a few files with regular extents. */
static int populate_root(const char *root)
{
	static const char *const dirs[] = { "alpha", "beta", "beta/gamma", "big" };
	char path[4096];
	uint8_t small[100], big[20480];
	uint32_t seed = 12345;
	int ret;

	if (mkdir(root, 0755) < 0)
		return -errno;
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		if (pathf(path, sizeof(path), "%s/%s", root, dirs[i]))
			return -ENAMETOOLONG;
		if (mkdir(path, 0755) < 0)
			return -errno;
	}
	for (unsigned i = 0; i < SMALL_FILES; i++) {
		if (pathf(path, sizeof(path), "%s/%s/file-%05u", root, dirs[i % 3], i))
			return -ENAMETOOLONG;
		memset(small, 'a' + (int)(i % 26), sizeof(small));
		snprintf((char *)small, sizeof(small), "small file %u\n", i);
		if ((ret = write_file(path, small, sizeof(small))))
			return ret;
	}
	for (unsigned i = 0; i < BIG_FILES; i++) {
		for (size_t j = 0; j < sizeof(big); j++) {
			seed = seed * 1103515245 + 12345;
			big[j] = (uint8_t)(seed >> 16);
		}
		if (pathf(path, sizeof(path), "%s/big/blob-%02u", root, i))
			return -ENAMETOOLONG;
		if ((ret = write_file(path, big, sizeof(big))))
			return ret;
	}
	if (pathf(path, sizeof(path), "%s/alpha/link", root))
		return -ENAMETOOLONG;
	if (symlink("file-00000", path) < 0)
		return -errno;
	return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static void remove_tree(const char *path)
{
	nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static int lock_dir(const char *dir)
{
	char path[4096];
	int fd;

	if (pathf(path, sizeof(path), "%s/lock", dir))
		return -ENAMETOOLONG;
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	while (flock(fd, LOCK_EX) < 0) {
		if (errno != EINTR) {
			int ret = -errno;
			close(fd);
			return ret;
		}
	}
	return fd;
}

static void unlock_dir(int fd)
{
	flock(fd, LOCK_UN);
	close(fd);
}

/* Build the image of recipe r at final (the lock is held). */
static int build_image(const struct recipe *r, const char *dir, const char *mkfs, const char *final)
{
	char tmp[4096], root[4200], image[4200], log[4200];
	char *argv[16];
	int argc = 0, fd, ret;

	if (pathf(tmp, sizeof(tmp), "%s/build-%s-XXXXXX", dir, r->name))
		return -ENAMETOOLONG;
	if (!mkdtemp(tmp))
		return -errno;
	if (pathf(root, sizeof(root), "%s/root", tmp) || pathf(image, sizeof(image), "%s/image", tmp) ||
	    pathf(log, sizeof(log), "%s/mkfs.log", tmp)) {
		ret = -ENAMETOOLONG;
		goto out;
	}
	ret = populate_root(root);
	if (ret)
		goto out;
	fd = open(image, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || ftruncate(fd, (off_t)(r->size ? r->size : IMAGE_PRESIZE)) < 0) {
		ret = -errno;
		if (fd >= 0)
			close(fd);
		goto out;
	}
	close(fd);
	argv[argc++] = (char *)mkfs;
	argv[argc++] = "-q";
	argv[argc++] = "-f";
	for (int i = 0; r->mkfs_args[i]; i++)
		argv[argc++] = (char *)r->mkfs_args[i];
	argv[argc++] = "--rootdir";
	argv[argc++] = root;
	argv[argc++] = image;
	argv[argc] = NULL;
	ret = run_tool(argv, NULL, log);
	if (ret != 0) {
		char *err = read_text_file(log);
		cr_log_error("mkfs.btrfs for fixture '%s' failed (status %d): %s", r->name, ret,
			     err ? err : "");
		free(err);
		ret = ret < 0 ? ret : -EIO;
		goto out;
	}
	if (rename(image, final) < 0)
		ret = -errno;
out:
	remove_tree(tmp);
	return ret;
}

int fixture_image(const char *recipe_name, char *path_out, size_t len)
{
	const struct recipe *r = recipe_by_name(recipe_name);
	char dir[4096], mkfs[4096];
	int lock, ret = 0;

	if (!r)
		return -EINVAL;
	ret = fixture_dir(dir, sizeof(dir));
	if (ret)
		return ret;
	if (pathf(path_out, len, "%s/%s-v%d.img", dir, r->name, FIXTURE_VERSION))
		return -ENAMETOOLONG;
	if (access(path_out, R_OK) == 0)
		return 0;
	if (find_tool("mkfs.btrfs", mkfs, sizeof(mkfs)))
		cr_skip_test("mkfs.btrfs is not installed: the image tests need btrfs-progs");
	lock = lock_dir(dir);
	if (lock < 0)
		return lock;
	if (access(path_out, R_OK) != 0)
		ret = build_image(r, dir, mkfs, path_out);
	unlock_dir(lock);
	return ret;
}

char *fixture_dump_tree(const char *recipe_name, const char *tree)
{
	char image[4096], dump[4200], tmp[4300], btrfs[4096], dir[4096];
	char *text;
	int ret, lock;

	ret = fixture_image(recipe_name, image, sizeof(image));
	cr_assert_eq(ret, 0, "fixture image '%s': %s", recipe_name, strerror(-ret));
	cr_assert_eq(pathf(dump, sizeof(dump), "%s.dump-%s.txt", image, tree), 0);
	if (access(dump, R_OK) != 0) {
		char *argv[] = { btrfs, "inspect-internal", "dump-tree", "-t", (char *)tree, image, NULL };
		if (find_tool("btrfs", btrfs, sizeof(btrfs)))
			cr_skip_test("btrfs (btrfs-progs) is not installed: cannot compare with dump-tree");
		cr_assert_eq(fixture_dir(dir, sizeof(dir)), 0);
		lock = lock_dir(dir);
		cr_assert(lock >= 0, "locking %s: %s", dir, strerror(-lock));
		if (access(dump, R_OK) != 0) {
			ret = pathf(tmp, sizeof(tmp), "%s.%d", dump, (int)getpid());
			if (ret == 0)
				ret = run_tool(argv, tmp, NULL);
			if (ret == 0 && rename(tmp, dump) < 0)
				ret = -errno;
		}
		unlock_dir(lock);
		cr_assert_eq(ret, 0, "btrfs inspect-internal dump-tree -t %s %s: status %d", tree, image, ret);
	}
	text = read_text_file(dump);
	cr_assert_not_null(text, "cannot read %s", dump);
	return text;
}

size_t fixture_count_lines(const char *text, const char *prefix, const char *contains)
{
	size_t n = 0, plen = strlen(prefix), clen = contains ? strlen(contains) : 0;
	const char *p = text, *end = text + strlen(text);

	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		size_t len = eol ? (size_t)(eol - p) : (size_t)(end - p);
		if (len >= plen && !memcmp(p, prefix, plen) && (!contains || memmem(p, len, contains, clen)))
			n++;
		p += len + 1;
	}
	return n;
}

/* Private mappings handed to memory ios; unmapped at exit. */
static struct { void *addr; size_t len; } maps[16];
static unsigned nmaps;

__attribute__((destructor)) static void unmap_all(void)
{
	for (unsigned i = 0; i < nmaps; i++)
		munmap(maps[i].addr, maps[i].len);
	nmaps = 0;
}

int fixture_load_memory_size(const char *path, size_t size, struct io_dev **io)
{
	struct stat st;
	void *addr;
	int fd, ret;

	*io = NULL;
	if (nmaps == sizeof(maps) / sizeof(maps[0]))
		return -ENOMEM;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		ret = -errno;
		close(fd);
		return ret;
	}
	if (size == 0 || size > (size_t)st.st_size)
		size = (size_t)st.st_size;
	/* copy-on-write: corrupting the device touches only this process's pages */
	addr = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	close(fd);
	if (addr == MAP_FAILED)
		return -errno;
	ret = io_open_mem(addr, size, false, io);
	if (ret) {
		munmap(addr, size);
		return ret;
	}
	maps[nmaps].addr = addr;
	maps[nmaps].len = size;
	nmaps++;
	return 0;
}

int fixture_load_memory(const char *path, struct io_dev **io)
{
	return fixture_load_memory_size(path, 0, io);
}

struct fs_info *fixture_open(const char *recipe_name, const struct fs_open_options *opts)
{
	char path[4096];
	struct io_dev *io;
	struct fs_info *fs;
	int ret;

	ret = fixture_image(recipe_name, path, sizeof(path));
	cr_assert_eq(ret, 0, "fixture image '%s': %s", recipe_name, strerror(-ret));
	ret = fixture_load_memory(path, &io);
	cr_assert_eq(ret, 0, "loading %s: %s", path, strerror(-ret));
	ret = fs_open_devices(&io, 1, opts, &fs);
	cr_assert_eq(ret, 0, "opening fixture '%s': %d %s", recipe_name, ret, btk_error_msg());
	cr_assert_not_null(fs);
	return fs;
}

void fixture_note(void *arg, enum fs_note_level level, const char *msg)
{
	struct note_log *log = arg;
	size_t used = strlen(log->all);

	if ((unsigned)level < 3)
		log->count[level]++;
	log->total++;
	snprintf(log->last, sizeof(log->last), "%s", msg);
	if (used < sizeof(log->all))
		snprintf(log->all + used, sizeof(log->all) - used, "%s\n", msg);
}

void fixture_drop_cache(struct fs_info *fs, uint64_t budget)
{
	block_cache_destroy(fs);
	cr_assert_eq(block_cache_create(fs, budget), 0);
}

int fixture_corrupt_block(struct fs_info *fs, uint64_t bytenr, int mirror)
{
	struct phys_copy copies[MAX_COPIES];
	uint64_t contig;
	uint8_t *junk;
	int n, ret = 0;

	n = volumes_map(fs, bytenr, fs->nodesize, copies, &contig);
	if (n < 0)
		return n;
	if (contig < fs->nodesize || mirror >= n)
		return -EINVAL;
	junk = malloc(fs->nodesize);
	if (!junk)
		return -ENOMEM;
	/* keep the header readable, scramble everything after the checksum */
	for (int m = 0; m < n && !ret; m++) {
		if (mirror >= 0 && m != mirror)
			continue;
		if (!copies[m].dev || !copies[m].dev->io) {
			ret = -ENODEV;
			break;
		}
		ret = io_read(copies[m].dev->io, junk, fs->nodesize, copies[m].physical);
		if (ret)
			break;
		for (uint32_t i = BTRFS_CSUM_SIZE; i < fs->nodesize; i += 7)
			junk[i] ^= 0x5a;
		ret = io_write(copies[m].dev->io, junk, fs->nodesize, copies[m].physical);
	}
	free(junk);
	if (!ret)
		fixture_drop_cache(fs, 0);
	return ret;
}

void fixture_temp_file(char *path_out, size_t len, const char *src, uint64_t size)
{
	const char *tmp = getenv("TMPDIR");
	int fd;

	if (!tmp || !*tmp)
		tmp = "/tmp";
	cr_assert_eq(pathf(path_out, len, "%s/btk-unit-XXXXXX", tmp), 0);
	fd = mkstemp(path_out);
	cr_assert(fd >= 0, "mkstemp %s: %s", path_out, strerror(errno));
	if (src) {
		int in = open(src, O_RDONLY);
		uint8_t buf[65536];
		uint64_t done = 0;
		cr_assert(in >= 0, "open %s: %s", src, strerror(errno));
		while (done < size) {
			size_t want = size - done < sizeof(buf) ? (size_t)(size - done) : sizeof(buf);
			ssize_t n = read(in, buf, want);
			cr_assert(n >= 0, "read %s: %s", src, strerror(errno));
			if (n == 0)
				break;
			cr_assert_eq(write(fd, buf, (size_t)n), n);
			done += (uint64_t)n;
		}
		close(in);
	} else {
		cr_assert_eq(ftruncate(fd, (off_t)size), 0);
	}
	close(fd);
}

void fixture_btrfs_check_clean(const void *buf, size_t size)
{
	const char *dirs[] = { "/usr/bin", "/usr/sbin", "/bin", "/sbin", "/usr/local/bin" };
	char btrfs[256] = "", path[4096], log[4200], cmd[9000];
	int fd, status;

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]) && !btrfs[0]; i++) {
		snprintf(btrfs, sizeof(btrfs), "%s/btrfs", dirs[i]);
		if (access(btrfs, X_OK) != 0)
			btrfs[0] = 0;
	}
	if (!btrfs[0]) {
		cr_log_warn("btrfs (btrfs-progs) not installed: the image is not checked by btrfs check");
		return;
	}
	fixture_temp_file(path, sizeof(path), NULL, 0);
	fd = open(path, O_WRONLY | O_TRUNC);
	cr_assert(fd >= 0);
	cr_assert_eq(write(fd, buf, size), (ssize_t)size);
	close(fd);
	snprintf(log, sizeof(log), "%s.log", path);
	snprintf(cmd, sizeof(cmd), "%s check --readonly '%s' >'%s' 2>&1", btrfs, path, log);
	status = system(cmd);
	if (status != 0) {
		char report[4096] = "";
		FILE *f = fopen(log, "r");
		if (f) {
			size_t n = fread(report, 1, sizeof(report) - 1, f);
			report[n] = 0;
			fclose(f);
		}
		unlink(path);
		unlink(log);
		cr_assert_fail("btrfs check found problems (status %d):\n%s", status, report);
	}
	unlink(path);
	unlink(log);
}

void fixture_image_copy(const char *recipe_name, uint8_t **buf, size_t *size)
{
	char path[4096];
	struct stat st;
	int fd, ret = fixture_image(recipe_name, path, sizeof(path));

	cr_assert_eq(ret, 0, "fixture image '%s': %s", recipe_name, strerror(-ret));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert(fd >= 0 && fstat(fd, &st) == 0);
	*size = (size_t)st.st_size;
	*buf = mmap(NULL, *size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	close(fd);
	cr_assert_neq(*buf, MAP_FAILED);
}

struct fs_info *fixture_open_buffer(uint8_t *buf, size_t size, bool writable)
{
	struct fs_open_options opts;
	struct fs_info *fs;
	struct io_dev *io;
	int ret;

	cr_assert_eq(io_open_mem(buf, size, false, &io), 0);
	fs_open_options_init(&opts);
	opts.writable = writable;
	ret = fs_open_devices(&io, 1, &opts, &fs);
	cr_assert_eq(ret, 0, "opening the image: %s", btk_error_msg());
	return fs;
}
