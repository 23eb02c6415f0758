// SPDX-License-Identifier: GPL-2.0-only
/* Opening an image of either format and reading it as records. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "image/fmt_btrfs_image.h"
#include "image/image.h"
#include "image/imgio.h"
#include <btk/format.h>

void img_header_from_super(struct img_header *h, const uint8_t *sb)
{
	h->version = 0;
	memcpy(h->fsid, super_fsid_ptr(sb), 16);
	memcpy(h->metadata_uuid, (super_incompat_flags(sb) & BTRFS_FEATURE_INCOMPAT_METADATA_UUID)
					 ? super_metadata_uuid_ptr(sb) : super_fsid_ptr(sb), 16);
	h->nodesize = super_nodesize(sb);
	h->sectorsize = super_sectorsize(sb);
	h->csum_type = super_csum_type(sb);
	h->generation = super_generation(sb);
	h->sys_chunk_array_size = super_sys_chunk_array_size(sb);
	if (h->sys_chunk_array_size > sizeof(h->sys_chunk_array))
		h->sys_chunk_array_size = 0;
	memcpy(h->sys_chunk_array, super_sys_chunk_array_ptr(sb), h->sys_chunk_array_size);
}

/* A btrfs-image dump arriving on a pipe whose first bytes were already read
 * for probing: a thread feeds those bytes and then the rest through a new pipe. */
struct feeder {
	int in, out;
	uint8_t head[4096];
	size_t head_len;
};

static void *feeder_main(void *arg)
{
	struct feeder *f = arg;
	uint8_t buf[65536];
	ssize_t n;

	if (!img_write_all(f->out, f->head, f->head_len))
		while ((n = img_read_upto(f->in, buf, sizeof(buf))) > 0)
			if (img_write_all(f->out, buf, (size_t)n))
				break;
	close(f->out);
	free(f);
	return NULL;
}

static int feed_through_pipe(int fd, const uint8_t *head, size_t n, int *out_fd)
{
	struct feeder *f = calloc(1, sizeof(*f));
	pthread_t t;
	int p[2];

	if (!f)
		return -ENOMEM;
	if (pipe2(p, O_CLOEXEC)) {
		free(f);
		return -errno;
	}
	f->in = fd;
	f->out = p[1];
	memcpy(f->head, head, n);
	f->head_len = n;
	if (pthread_create(&t, NULL, feeder_main, f)) {
		close(p[0]);
		close(p[1]);
		free(f);
		return -EAGAIN;
	}
	pthread_detach(t);
	*out_fd = p[0];
	return 0;
}

int img_source_open(struct img_source *src, const char *path)
{
	uint8_t head[4096];
	int fd, ret;
	ssize_t n;

	memset(src, 0, sizeof(*src));
	fd = strcmp(path, "-") ? open(path, O_RDONLY | O_CLOEXEC) : 0;
	if (fd < 0) {
		ret = -errno;
		snprintf(src->err, sizeof(src->err), "cannot open %s: %s", path, strerror(errno));
		return ret;
	}
	n = img_read_upto(fd, head, sizeof(head));
	if (n < 0) {
		snprintf(src->err, sizeof(src->err), "cannot read %s: %s", path, strerror((int)-n));
		return (int)n;
	}
	if (btk_probe(head, (size_t)n)) {
		src->format = IMG_FORMAT_BTK;
		ret = btk_reader_open(&src->btk, fd, head, (size_t)n);
		if (ret) {
			snprintf(src->err, sizeof(src->err), "%s: %s", path,
				 src->btk ? btk_reader_error(src->btk) : strerror(-ret));
			return ret;
		}
		src->header = *btk_reader_header(src->btk);
		src->header.devices = NULL; /* owned by the reader; see btk_reader_header() */
		src->header_valid = true;
		return 0;
	}
	if (!bimg_probe(head, (size_t)n)) {
		snprintf(src->err, sizeof(src->err), "%s is neither a btk image nor a btrfs-image dump (%zd bytes)",
			 path, n);
		return -EINVAL;
	}
	src->format = IMG_FORMAT_BTRFS_IMAGE;
	if (lseek(fd, 0, SEEK_SET) != 0) {
		int pfd = -1;
		if ((ret = feed_through_pipe(fd, head, (size_t)n, &pfd))) {
			snprintf(src->err, sizeof(src->err), "cannot set up reading %s: %s", path, strerror(-ret));
			return ret;
		}
		fd = pfd;
	}
	ret = bimg_reader_open(&src->bimg, fd);
	if (ret) {
		snprintf(src->err, sizeof(src->err), "%s: %s", path,
			 src->bimg ? bimg_reader_error(src->bimg) : strerror(-ret));
		return ret;
	}
	/* the superblock is the first item: read it now for the header */
	ret = img_source_next(src, &src->held);
	if (ret <= 0) {
		if (!ret)
			snprintf(src->err, sizeof(src->err), "%s: empty btrfs-image dump", path);
		return ret ? ret : -EINVAL;
	}
	if (src->held.type != IMG_REC_SUPER) {
		snprintf(src->err, sizeof(src->err), "%s: the first item of the btrfs-image dump is not the superblock",
			 path);
		return -EUCLEAN;
	}
	img_header_from_super(&src->header, src->held.data);
	src->header.num_devices = (uint32_t)super_num_devices(src->held.data);
	src->header_valid = true;
	src->have_held = true;
	return 0;
}

static int bimg_next(struct img_source *src, struct img_record *rec)
{
	uint32_t ns = src->header_valid ? src->header.nodesize : 0;
	uint64_t bytenr;
	const uint8_t *data;
	uint32_t len;
	int ret;

	if (!src->pend_len) {
		ret = bimg_reader_next(src->bimg, &bytenr, &data, &len);
		if (ret <= 0) {
			if (ret < 0)
				snprintf(src->err, sizeof(src->err), "%s", bimg_reader_error(src->bimg));
			return ret;
		}
		src->items++;
		if (bytenr == BTRFS_SUPER_INFO_OFFSET && len == BTRFS_SUPER_INFO_SIZE) {
			rec->type = IMG_REC_SUPER;
			rec->copy = 0;
			rec->logical = dev_item_devid(super_dev_item_ptr(data));
			rec->len = len;
			rec->data = data;
			rec->frame_offset = 0;
			return 1;
		}
		src->pend_data = data;
		src->pend_logical = bytenr;
		src->pend_len = len;
	}
	len = ns && src->pend_len >= ns ? ns : src->pend_len;
	rec->type = IMG_REC_TREE;
	rec->copy = 0;
	rec->logical = src->pend_logical;
	rec->len = len;
	rec->data = src->pend_data;
	rec->frame_offset = 0;
	src->pend_data += len;
	src->pend_logical += len;
	src->pend_len -= len;
	return 1;
}

int img_source_next(struct img_source *src, struct img_record *rec)
{
	int ret;

	if (src->have_held) {
		*rec = src->held;
		src->have_held = false;
		return 1;
	}
	rec->frame = NULL;
	if (src->format == IMG_FORMAT_BTRFS_IMAGE)
		return bimg_next(src, rec);
	ret = btk_reader_next(src->btk, rec);
	if (ret < 0)
		snprintf(src->err, sizeof(src->err), "%s", btk_reader_error(src->btk));
	return ret;
}

const char *img_source_error(const struct img_source *src)
{
	return src->err[0] ? src->err : "unknown error";
}

void img_source_close(struct img_source *src)
{
	btk_reader_free(src->btk);
	if (src->bimg)
		bimg_reader_free(src->bimg);
	src->btk = NULL;
	src->bimg = NULL;
}
